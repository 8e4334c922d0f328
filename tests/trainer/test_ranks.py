"""Slow: the issue's command, two ranks with gloo on the CPU. Rank 0 alone orchestrates (one
folder lock, one set of services, one metrics line per step); both ranks update, and their
weights stay identical after every step (`rank_weight_spread` 0.0). Its step lines match a
one-process run of the same config: the simulated TEST DOUBLE's episodes do not depend on the
weights, so rewards and counts are equal exactly, and the losses to float rounding (the two
ranks sum their micro-batches' gradients in another order). Both runs use the same folder path
in turn: the run id (and with it the simulated outcomes) derives from the path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.run_support import CONFIGS, REPO, environment, metrics, run_train

pytestmark = pytest.mark.slow
TINY = CONFIGS / "simulated-tiny.toml"


def test_two_ranks_with_gloo_run_the_tiny_config_with_one_orchestrator(tmp_path):
    bin_dir = Path(sys.executable).parent
    out = tmp_path / "run"
    command = [
        str(bin_dir / "torchrun"), "--standalone", "--nproc-per-node", "2",
        str(bin_dir / "intraskill"), "train", "run", "--config", str(TINY), "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=REPO, env=environment(), capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = metrics(out)
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    assert json.loads((out / "run.json").read_text())["world_size"] == 2
    assert all(line["ranks"] == 2 and line["rank_weight_spread"] == 0.0 for line in lines)

    out.rename(tmp_path / "ranks")
    single = run_train(TINY, out)
    assert single.returncode == 0, single.stderr[-3000:]
    for two, one in zip(lines, metrics(out), strict=True):
        for key in ("round", "step", "episodes_generated", "episodes_admitted", "reward"):
            assert two[key] == one[key], key
        assert two["optimizer_updates"] == one["optimizer_updates"] == 2
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-3, abs=1e-6)
