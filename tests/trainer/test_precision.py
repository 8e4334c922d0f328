"""bf16 presets compute in bf16 over fp32 master weights and fp32 optimizer state.

The issue's measurement: at the paper's lr 1e-6, AdamW stepping bf16 parameters changed 2.0 %
of the tiny model's elements against 100 % in fp32 (bf16 keeps 8 mantissa bits, so a step of
1e-6 on a weight of size ~1e-2 rounds away). With fp32 masters the bf16 run must change >= 99 %
of the elements (the issue's bar), and move them as the fp32 reference does: Adam's first steps
are about lr * sign(gradient), so a weight moves the other way only where bf16 rounding flips
the sign of a gradient that is nearly zero. We allow 5 % of elements to disagree in direction
and 25 % relative L2 difference between the two changes: bf16's ~3 significant digits in the
forward perturb every gradient a little; a bf16-stepped model fails both bounds by far.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from services.trainer.config import TrainerConfig  # noqa: E402
from services.trainer.policy import Policy  # noqa: E402
from shared.runtime.agent.models import resolve_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _changes(dtype: str, folder: Path) -> dict:
    out = folder / f"{dtype}.pt"
    done = subprocess.run(
        [sys.executable, "-m", "tests.trainer.precision_probe", dtype, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=True)


def test_bf16_updates_at_lr_1e_6_change_the_weights_as_fp32_does(tmp_path):
    bf16, fp32 = _changes("bfloat16", tmp_path), _changes("float32", tmp_path)
    assert bf16["param_dtypes"] == bf16["moment_dtypes"] == ["torch.float32"]
    changed = sum(int((d != 0).sum()) for d in bf16["changes"].values())
    total = sum(d.numel() for d in bf16["changes"].values())
    assert changed / total >= 0.99, f"{changed / total:.4f} of elements changed"
    reference = fp32["changes"]
    disagree = sum(
        int((torch.sign(d) != torch.sign(reference[n])).sum()) for n, d in bf16["changes"].items()
    )
    assert disagree / total <= 0.05, f"{disagree / total:.4f} moved against the fp32 reference"
    difference = sum(float((d - reference[n]).pow(2).sum()) for n, d in bf16["changes"].items())
    size = sum(float(d.pow(2).sum()) for d in reference.values())
    assert (difference / size) ** 0.5 <= 0.25


def test_an_optimizer_is_never_built_over_bf16_parameters():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model("tiny")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    with pytest.raises(ValueError, match="load float32 master weights"):
        Policy(model, tokenizer, TrainerConfig(model="tiny"), temperature=1.0)
