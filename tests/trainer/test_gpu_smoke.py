"""`deploy/gpu-smoke.sh` (`make gpu-smoke`) as far as a CPU can check it.

The script needs a GPU to run (issue 19, item 9); here: its config is a 2-step round on one
rollout server that the script starts (same port, same served name, bf16 weights pushed in
full), every command it would run is the trainer's own CLI with options that exist, its report
prints the figures the issue asks for from a run's metrics, and without a GPU it runs nothing
and says so. The real run is the `gpu` test below (skipped without CUDA).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from services.trainer.config import TrainerConfig
from tests.trainer.run_support import CONFIGS, REPO

SCRIPT = REPO / "deploy" / "gpu-smoke.sh"
CUDA = pytest.importorskip("torch").cuda.is_available()
CONFIG = TrainerConfig.from_toml(CONFIGS / "gpu-smoke.toml")
ENV = {**os.environ, "VENV": str(REPO / ".venv"), "COLUMNS": "200"}


def dry_run() -> list[list[str]]:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], env=ENV, capture_output=True, text=True, check=True
    )
    return [shlex.split(line) for line in done.stdout.splitlines()]


def options(argv: list[str]) -> list[str]:
    return [arg.split("=")[0] for arg in argv if arg.startswith("--")]


def cli_help(*command: str) -> str:
    argv = [sys.executable, "-m", "shared.apps.cli", *command, "--help"]
    return subprocess.run(argv, cwd=REPO, env=ENV, capture_output=True, text=True).stdout


def test_the_config_is_one_round_of_two_steps_on_the_scripts_server():
    assert CONFIG.total_steps == 2 and CONFIG.rounds == 1
    assert (CONFIG.model, CONFIG.dtype, CONFIG.device) == ("smollm2", "bfloat16", "cuda")
    servers = CONFIG.rollout_servers
    assert servers.weight_sync == "full" and CONFIG.importance_sampling
    [serve, _, _] = dry_run()
    port = serve[serve.index("--port") + 1]
    assert servers.urls == (f"http://127.0.0.1:{port}/v1",)
    assert serve[serve.index("--served-model-name") + 1] == servers.served_model
    assert serve[serve.index("--dtype") + 1] == "bfloat16"
    assert "--weight-updates" in serve  # the server accepts the trainer's pushes


def test_every_command_is_the_projects_cli_with_options_it_has():
    serve, standin, train = dry_run()
    assert serve[1:4] == ["agent", "serve", "smollm2"]
    serve_help = cli_help("agent", "serve")
    assert all(option in serve_help for option in options(serve)), options(serve)
    # accelerate with FSDP on one process, then the trainer's own `train run` on the config
    launch = train.index("launch")
    assert train[launch + 1 : launch + 5] == [
        "--config_file", "configs/accelerate_fsdp.yaml", "--num_processes", "1",
    ]  # fmt: skip
    run = train[train.index("-m") + 1 :]
    assert run[:4] == ["shared.apps.cli", "train", "run", "--config"]
    assert run[4] == "configs/gpu-smoke.toml"
    train_help = cli_help("train", "run")
    assert all(option in train_help for option in options(run[3:])), options(run)
    assert standin[1:3] == ["-m", "tests.trainer.analyst_standin"]  # the TEST DOUBLE analyst


def test_the_report_prints_mismatch_tokens_per_second_and_peak_memory(tmp_path):
    lines = [
        {"step": 1, "logprob_mismatch": 2.5e-3, "logprob_mismatch_max": 0.125,
         "importance_weight": {"min": 0.9, "mean": 1.0025, "max": 1.2}, "tokens": 12000,
         "seconds": {"update_s": 4.0}, "peak_gpu_memory_gb": 3.25},
        {"step": 2, "logprob_mismatch": 1e-2, "logprob_mismatch_max": 0.5,
         "importance_weight": None, "tokens": 9000, "seconds": {"update_s": 3.0},
         "peak_gpu_memory_gb": None},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = subprocess.run(
        ["bash", str(SCRIPT), "--report", str(tmp_path)], env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert re.search(r"mismatch mean 2\.50e-03 max 1\.25e-01", first)
    assert "importance weight mean 1.0025" in first
    assert "12000 tokens in 4.0 s = 3000 tokens/s" in first and "3.25 GiB" in first
    assert "3000 tokens/s" in second and "n/a (no GPU)" in second


@pytest.mark.skipif(CUDA, reason="a GPU machine runs it")
def test_without_a_gpu_it_runs_nothing_and_says_so(tmp_path):
    env = {**ENV, "GPU_SMOKE_OUT": str(tmp_path / "out")}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "no CUDA device" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.gpu
@pytest.mark.slow
def test_the_smoke_run_on_a_gpu(tmp_path):
    env = {**ENV, "GPU_SMOKE_OUT": str(tmp_path / "out")}
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=660
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 2:" in done.stdout and "GiB" in done.stdout
