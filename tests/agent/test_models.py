"""Local models: the tiny test model is deterministic; SmolLM2 converts from its wheel once."""

from __future__ import annotations

import json
import time

import pytest

from shared.runtime.agent.models import build_tiny_model, model_identity, resolve_model


def test_tiny_model_is_deterministic_per_seed(tmp_path, tiny_dir) -> None:
    again = build_tiny_model(tmp_path / "a", seed=0)
    other = build_tiny_model(tmp_path / "b", seed=1)
    assert model_identity(again)["checkpoint_id"] == model_identity(tiny_dir)["checkpoint_id"]
    assert model_identity(other)["checkpoint_id"] != model_identity(tiny_dir)["checkpoint_id"]
    assert (again / "tokenizer.json").read_text() == (tiny_dir / "tokenizer.json").read_text()
    size = sum(file.stat().st_size for file in again.iterdir())
    assert size < 5_000_000
    # A second call reuses the directory instead of rebuilding it.
    stamp = (again / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tmp_path / "a", seed=0) == again
    assert (again / "model.safetensors").stat().st_mtime_ns == stamp


def test_tiny_tokenizer_round_trips_and_renders_tools(tiny_tokenizer) -> None:
    text = "<|im_start|>user\n购物任务：买 search[red shoes] $12.99<|im_end|>\n"
    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    assert tiny_tokenizer.decode(ids, skip_special_tokens=False) == text
    assert tiny_tokenizer.convert_tokens_to_ids("<|im_end|>") in ids
    rendered = tiny_tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tools=[{"type": "function", "function": {"name": "click"}}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "<tools>" in rendered and rendered.endswith("<|im_start|>assistant\n")


def test_resolve_model(tmp_path, tiny_dir) -> None:
    assert resolve_model(str(tiny_dir)) == tiny_dir
    with pytest.raises(FileNotFoundError, match="neither"):
        resolve_model(str(tmp_path / "missing"))
    assert model_identity(tmp_path) == {"model_id": tmp_path.name, "checkpoint_id": tmp_path.name}


@pytest.mark.slow
def test_smollm2_converts_once_and_loads_fast(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from shared.runtime.agent.models import prepare_smollm2, smollm2_gguf_path

    path = prepare_smollm2(tmp_path)
    identity = json.loads((path / "intraskill-model.json").read_text())
    assert identity["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    started = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    assert time.perf_counter() - started < 20  # about a second on an idle machine
    gguf = smollm2_gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, local_files_only=True
    )
    ids = torch.tensor([[1, 2, 3, 4, 5, 100, 200]])
    with torch.no_grad():
        assert torch.allclose(
            model(input_ids=ids).logits, reference(input_ids=ids).logits, atol=1e-5
        )
    assert prepare_smollm2(tmp_path) == path  # cached


def test_the_default_model_cache_follows_intraskill_model_cache(tmp_path) -> None:
    """The trainer pod's HOME is read-only; its INTRASKILL_MODEL_CACHE (a /tmp volume) must be
    where resolve_model builds and finds models, not only the CLI's --cache-dir default."""
    import os
    import subprocess
    import sys

    code = "from shared.runtime.agent.models import DEFAULT_CACHE; print(DEFAULT_CACHE)"
    env = {**os.environ, "INTRASKILL_MODEL_CACHE": str(tmp_path / "models")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == str(tmp_path / "models"), out.stderr
