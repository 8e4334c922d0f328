"""The device check's measurements (deploy/gpu-check.sh): the paper update at the paper model's
true shape, in-process generation at that shape, and the figures of a CUDA `train run`.

The weights are randomly initialised from a vendored `config.json` of the 4B model
(`deploy/gpu-check/qwen3.5-4b/config.json`): throughput and memory do not depend on their
values, and the machine has no network to fetch them. Token ids are random too (seeded).

    accelerate launch --config_file configs/accelerate_fsdp.yaml --num_processes 1 \\
        -m services.trainer.gpu_check update --out update.json     # FSDP, bf16 over fp32 masters
    python -m services.trainer.gpu_check generate --out generate.json
    python -m services.trainer.gpu_check run-figures RUN_DIR --out run.json
    python -m services.trainer.gpu_check merge a.json b.json ... --out gpu-check.json

Each subcommand writes one JSON object; an error inside a measurement is recorded in it
(`error`), so one failure does not cost the other measurements their share of a short lease.
MFU counts the matrix products of the update (6 x parameters x tokens for the decoder layers, the
output head at generated tokens only, causal attention of the full-attention layers) against the
H200's measured bf16 rate, ~790 TFLOP/s (a 8192^3 product on the lent machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MODEL_CONFIG = REPO / "deploy" / "gpu-check" / "qwen3.5-4b" / "config.json"
PAPER_CONFIG = REPO / "configs" / "paper.toml"
H200_BF16_FLOPS = 790e12
SEED = 20260901


def text_config(path: Path = MODEL_CONFIG) -> Any:
    """The decoder's config (the vendored file is the text model of the 4B checkpoint)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(path.parent), local_files_only=True)


def random_model(config: Any, dtype: Any, device: str) -> Any:
    """The causal LM of `config` with random weights, built directly on `device`."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(SEED)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)


def synthetic_episodes(
    rows: int, row_tokens: int, generated_fraction: float, vocab: int, seed: int = SEED
) -> list[list[Any]]:
    """`rows` one-sample episodes of `row_tokens` random ids; the last `generated_fraction` of
    each row carries loss (the reply after its context), with advantages of both signs."""
    import random

    from shared.runtime.agent.advantage import TrainingSample
    from shared.runtime.agent.trajectory import Segment

    rng = random.Random(seed)
    generated = max(1, int(row_tokens * generated_fraction))
    episodes = []
    for index in range(rows):
        mask = [0] * (row_tokens - generated) + [1] * generated
        segment = Segment(
            turns=[0],
            token_ids=[rng.randrange(vocab) for _ in range(row_tokens)],
            loss_mask=mask,
            logprobs=[-1.0 * m for m in mask],
        )
        advantage = 1.0 if index % 2 == 0 else -1.0
        episodes.append([TrainingSample(f"e{index}", f"g{index}", segment, advantage)])
    return episodes


def update_flops(config: Any, parameters: int, tokens: int, generated: int, row: int) -> float:
    """Matrix-product FLOPs of one forward + backward over `tokens` in rows of `row` tokens."""
    embedding = config.vocab_size * config.hidden_size
    decoder = parameters - embedding  # the head is tied to the embedding in the 4B model
    full_layers = sum(kind == "full_attention" for kind in config.layer_types)
    width = config.num_attention_heads * config.head_dim
    attention = full_layers * 2 * 2 * row * width / 2  # QK^T and AV per token, causal half
    return 6.0 * (decoder * tokens + embedding * generated) + 3.0 * attention * tokens


def measure_update(
    micro_batch_tokens: list[int],
    rows: int,
    row_tokens: int,
    model_path: Path = MODEL_CONFIG,
    device: str = "cuda",
) -> dict[str, Any]:
    """The paper preset's update (FSDP under the launcher, bf16 compute over fp32 masters) at
    each micro-batch budget: tokens/s, peak GPU memory and MFU of the optimizer update."""
    import torch

    from services.trainer.config import TrainerConfig
    from services.trainer.policy import Policy

    model_config = text_config(model_path)
    base = TrainerConfig.from_toml(PAPER_CONFIG).with_(device=device)
    model = random_model(model_config, torch.float32, device)
    parameters = sum(p.numel() for p in model.parameters())
    # one update of `rows` episodes; no tokenizer at the true shape (random ids, pad 0)
    config = base.with_(global_batch=rows, micro_batch_tokens=max(micro_batch_tokens))
    policy = Policy(model, _NoTokenizer(), config, temperature=0.6)
    out: dict[str, Any] = {
        "model": str(model_path),
        "parameters": parameters,
        "distributed_type": str(policy.accelerator.distributed_type),
        "mixed_precision": policy.accelerator.mixed_precision,
        "rows": rows,
        "row_tokens": row_tokens,
        "budgets": [],
    }
    episodes = synthetic_episodes(rows, row_tokens, 0.25, model_config.vocab_size)
    for budget in micro_batch_tokens:
        policy.config = config.with_(micro_batch_tokens=budget)
        entry: dict[str, Any] = {"micro_batch_tokens": budget}
        try:
            policy.train_step(episodes)  # warm-up: kernels, allocator, FSDP's lazy init
            _synchronize(device)
            stats = policy.train_step(episodes)
            _synchronize(device)
            flops = update_flops(
                model_config, parameters, stats.tokens, stats.generated_tokens, row_tokens
            )
            entry.update(
                tokens=stats.tokens,
                update_s=stats.update_s,
                tokens_per_s=stats.tokens / stats.update_s,
                old_logprobs_s=stats.old_logprobs_s,
                peak_gpu_memory_gb=stats.peak_gpu_memory_gb,
                mfu=flops / stats.update_s / H200_BF16_FLOPS,
                grad_norm=stats.grad_norm,
            )
        except Exception as error:  # recorded: an OOM at 16k is itself a finding
            entry["error"] = _describe(error)
            if device == "cuda":
                torch.cuda.empty_cache()
        out["budgets"].append(entry)
        _progress(f"update at {budget} tokens per micro-batch: {entry}")
    return out


def measure_generation(
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    model_path: Path = MODEL_CONFIG,
    device: str = "cuda",
) -> dict[str, Any]:
    """Batched in-process generation (the transformers backend's path) at the 4B shape in bf16,
    every sequence forced to `new_tokens` (fixed lengths): generated tokens/s."""
    import torch

    model_config = text_config(model_path)
    model = random_model(model_config, torch.bfloat16, device).eval()
    generator = torch.Generator(device=device).manual_seed(SEED)
    prompt = torch.randint(
        0, model_config.vocab_size, (batch, prompt_tokens), device=device, generator=generator
    )
    fixed = {"min_new_tokens": new_tokens, "eos_token_id": None, "pad_token_id": 0}
    out: dict[str, Any] = {"batch": batch, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens}
    try:
        with torch.no_grad():
            warm_up = {**fixed, "min_new_tokens": 4}
            model.generate(prompt, max_new_tokens=4, do_sample=False, **warm_up)
            _synchronize(device)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            began = time.perf_counter()
            result = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False, **fixed)
            _synchronize(device)
        seconds = time.perf_counter() - began
        generated = (result.shape[1] - prompt_tokens) * batch
        out.update(
            seconds=seconds,
            generated_tokens=generated,
            tokens_per_s=generated / seconds,
            peak_gpu_memory_gb=_peak_gb(device),
        )
    except Exception as error:  # recorded, as above
        out["error"] = _describe(error)
    _progress(f"generation: {out}")
    return out


def run_figures(folder: Path) -> dict[str, Any]:
    """What a finished `train run` folder shows: its steps, where the update ran, how long."""
    lines = (
        [
            json.loads(line)
            for line in (folder / "metrics.jsonl").read_text().splitlines()
            if line.strip()
        ]
        if (folder / "metrics.jsonl").is_file()
        else []
    )
    record_path = folder / "run.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    peaks = [line.get("peak_gpu_memory_gb") for line in lines]
    return {
        "steps": len(lines),
        "finished": bool(record.get("finished")),
        # the update's accelerator memory is None on the CPU: a number proves the CUDA path
        "on_cuda": bool(lines) and all(peak is not None for peak in peaks),
        "peak_gpu_memory_gb": peaks,
        "update_s": [line["seconds"]["update_s"] for line in lines],
        "reward": [line.get("reward") for line in lines],
    }


def environment() -> dict[str, Any]:
    """Versions and the device, for the JSON's reader."""
    import importlib.metadata as metadata
    from importlib.util import find_spec

    import torch

    names = ("torch", "transformers", "accelerate", "trl", "datasets", "fastapi", "pydantic")
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    # without these, Qwen3.5's linear-attention layers run transformers' PyTorch reference code
    kernels = {name: find_spec(name) is not None for name in ("fla", "causal_conv1d")}
    return {
        "python": sys.version.split()[0],
        "device": device,
        "versions": versions,
        "linear_attention_kernels": kernels,
    }


def _synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _peak_gb(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


class _NoTokenizer:
    """The update needs only a pad id; random ids have no tokenizer."""

    pad_token_id = 0


def _describe(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return "".join(lines).strip()[-2000:]


def _progress(message: str) -> None:
    print(f"gpu-check: {message}", file=sys.stderr, flush=True)


def _write(data: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.trainer.gpu_check")
    commands = parser.add_subparsers(dest="command", required=True)
    update = commands.add_parser("update")
    update.add_argument("--micro-batch-tokens", type=int, nargs="+", default=[4096, 16384])
    update.add_argument("--rows", type=int, default=8)
    update.add_argument("--row-tokens", type=int, default=4096)
    generate = commands.add_parser("generate")
    generate.add_argument("--batch", type=int, default=32)
    generate.add_argument("--prompt-tokens", type=int, default=1024)
    generate.add_argument("--new-tokens", type=int, default=128)
    for command in (update, generate):  # a small config on the CPU: the tests' dry run
        command.add_argument("--model-config", type=Path, default=MODEL_CONFIG)
        command.add_argument("--device", default="cuda")
    figures = commands.add_parser("run-figures")
    figures.add_argument("folder", type=Path)
    merge = commands.add_parser("merge")
    merge.add_argument("parts", type=Path, nargs="*")
    for command in (update, generate, figures, merge):
        command.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "update":
        data = measure_update(
            args.micro_batch_tokens, args.rows, args.row_tokens, args.model_config, args.device
        )
    elif args.command == "generate":
        data = measure_generation(
            args.batch, args.prompt_tokens, args.new_tokens, args.model_config, args.device
        )
    elif args.command == "run-figures":
        data = run_figures(args.folder)
    else:
        data = {"environment": environment()}
        for part in args.parts:
            data[part.stem] = (
                json.loads(part.read_text())
                if part.is_file()
                else {"error": f"{part.name} was not written (the step failed or ran out of time)"}
            )
    _write(data, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
