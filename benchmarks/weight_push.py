"""The trainer's weight push, write half: seconds per GB to write the policy's weights into the
folder rollout servers reload (`services/trainer/saving.save_weights`, as `Policy.push_weights`
calls it), by push dtype and with or without the tied-head file.

The reload half is the server's (vLLM's `reload_weights`) and is not measured here: this
machine has no vLLM. Each case runs `--runs` times on SmolLM2-135M-Instruct (or `--model`), in
a fresh folder each time, alternating cases so machine noise hits all alike; prints the median
[min-max] seconds, the folder's size and seconds per GB, and writes the figures as JSON.

    python benchmarks/weight_push.py --runs 5 --out runs/bench/weight_push.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from services.trainer.saving import save_weights
from shared.runtime.agent.models import resolve_model

CASES = {  # name: (push dtype, tied-head file)
    "fp32 + tied head (before)": (torch.float32, True),
    "bf16, CUDA server (no tied head)": (torch.bfloat16, False),
    "bf16, CPU server (tied head)": (torch.bfloat16, True),
}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/weight_push.json"))
    args = parser.parse_args()
    accelerator = Accelerator(cpu=True)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model), dtype=torch.float32)
    model = accelerator.prepare(model)
    seconds: dict[str, list[float]] = {name: [] for name in CASES}
    sizes: dict[str, int] = {}
    for run in range(args.runs):
        for name, (dtype, tied) in CASES.items():
            folder = Path(tempfile.mkdtemp(prefix="push-"))
            started = time.perf_counter()
            save_weights(accelerator, model, folder, dtype=dtype, tied_head_file=tied)
            seconds[name].append(time.perf_counter() - started)
            sizes[name] = folder_bytes(folder)
            shutil.rmtree(folder)
        print(f"run {run + 1}/{args.runs}: " + ", ".join(
            f"{name} {seconds[name][-1]:.2f} s" for name in CASES))  # fmt: skip
    rows = {}
    print(f"\n{'case':36} {'seconds median [min-max]':>26} {'MB':>8} {'s/GB':>7}")
    for name in CASES:
        median = statistics.median(seconds[name])
        gb = sizes[name] / 1e9
        rows[name] = {"seconds": seconds[name], "median_s": median, "bytes": sizes[name],
                      "s_per_gb": median / gb}  # fmt: skip
        spread = f"{median:.2f} [{min(seconds[name]):.2f}-{max(seconds[name]):.2f}]"
        print(f"{name:36} {spread:>26} {sizes[name] / 1e6:8.0f} {median / gb:7.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"model": args.model, "runs": args.runs, "cases": rows}, indent=1)
    )
    print(f"figures in {args.out}")


if __name__ == "__main__":
    main()
