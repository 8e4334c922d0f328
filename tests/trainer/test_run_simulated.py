"""The whole loop with the simulated TEST DOUBLE policy, as a real process: counts, gates in the
registry, evidence, and resume after `kill -9` with no step line twice and nothing resubmitted.

Expected totals come from the config (steps x groups_per_wave x group_size generated, steps x
groups_admitted x group_size admitted, steps x 2 updates), as the method's release totals do.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import torch

from services.trainer.config import TrainerConfig
from services.trainer.run_context import RunState
from tests.trainer.run_support import (
    CONFIGS,
    REPO,
    analyst_standin,
    environment,
    metrics,
    registry_rows,
    run_train,
    train_command,
)

SMALL = CONFIGS / "simulated-small.toml"
TINY = CONFIGS / "simulated-tiny.toml"  # the default resume run: same assertions, fewer episodes


def assert_complete_run(out, config: TrainerConfig) -> None:
    lines = metrics(out)
    assert [line["step"] for line in lines] == list(range(1, config.total_steps + 1))
    assert sum(line["episodes_generated"] for line in lines) == (
        config.total_steps * config.groups_per_wave * config.group_size
    )
    assert sum(line["episodes_admitted"] for line in lines) == (
        config.total_steps * config.groups_admitted * config.group_size
    )
    assert sum(line["optimizer_updates"] for line in lines) == config.total_steps * 2
    assert [line["round"] for line in lines] == [
        r for r in range(config.rounds) for _ in range(config.steps_per_round)
    ]
    run = json.loads((out / "run.json").read_text())
    assert run["finished"] and len(run["rounds"]) == config.rounds
    gates = registry_rows(out, "gate_runs")
    assert len(gates) == config.rounds
    assert {g["status"] for g in gates} == {"complete"}
    assert sorted(r["gate_run_id"] for r in run["rounds"]) == sorted(g["id"] for g in gates)
    checkpoints = {c["id"] for c in registry_rows(out, "checkpoints")}
    assert checkpoints == {r["checkpoint_id"] for r in run["rounds"]}
    for record in run["rounds"]:
        folder = out / "checkpoints" / f"round-{record['round']:03d}"
        assert (folder / "model.safetensors").is_file()
        # a round trains on the bank the previous gate adopted
        if record["round"] > 0:
            previous = run["rounds"][record["round"] - 1]
            assert record["bank_id"] == previous["next_bank_id"]
    # evidence: one row per all-wrong group, none twice, as many as the metrics counted
    evidence = registry_rows(out, "all_wrong_groups")
    keys = [(row["round"], row["group_index"]) for row in evidence]
    assert len(keys) == len(set(keys)) == sum(line["all_wrong_groups"] for line in lines)
    standin = json.loads((out.parent / "analyst-standin" / "state.json").read_text())
    assert len(standin["groups"]) == len(evidence)


@pytest.mark.parametrize("path", [TINY, pytest.param(SMALL, marks=pytest.mark.slow)])
def test_a_simulated_run_resumes_after_kill_9(tmp_path, path):
    config = TrainerConfig.from_toml(path)
    out = tmp_path / "run"
    with analyst_standin(tmp_path / "analyst-standin") as analyst:
        interrupted_then_resumed(path, out, config, "--analyst-url", analyst)
    assert_complete_run(out, config)
    # replayed idempotent writes: evidence and checkpoints were not created twice
    log = (tmp_path / "analyst-standin" / "calls.jsonl").read_text().splitlines()
    compiles = [json.loads(line) for line in log if "compile" in line]
    assert len([c for c in compiles if not c["replayed"]]) == config.rounds


def interrupted_then_resumed(path, out, config: TrainerConfig, *extra: str) -> None:
    """Kill the run with SIGKILL inside round 1, then rerun the same command to the end."""
    process = subprocess.Popen(
        train_command(path, out, *extra),
        cwd=REPO,
        env=environment(*extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed_at = None
    deadline = time.monotonic() + 600
    try:
        # kill inside round 1, after its first step: the round's steps must be redone
        while time.monotonic() < deadline and process.poll() is None:
            if len(metrics(out)) >= config.steps_per_round + 1:
                killed_at = len(metrics(out))
                os.kill(process.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert killed_at is not None, f"the run ended before the kill: {process.stderr.read()[-3000:]}"
    assert process.returncode == -signal.SIGKILL
    services = json.loads((out / "run.json").read_text())["services"]
    time.sleep(1.0)
    for name in ("registry", "evaluator"):  # the children died with the trainer
        with pytest.raises(httpx.TransportError):
            httpx.get(services[name] + "/healthz", timeout=2)
    state = json.loads((out / "state.json").read_text())
    assert state["metrics_lines"] == config.steps_per_round  # the last checkpoint: round 0's end
    # what the run wrote is the schema: it validates and writes back unchanged
    assert RunState.model_validate(state).model_dump(mode="json") == state

    done = run_train(path, out, *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stderr
    # stdout is not a terminal: one plain line per step redone, each once
    redone = re.findall(r"^round \d+ step (\d+): reward", done.stdout, re.MULTILINE)
    assert redone == [str(s) for s in range(config.steps_per_round + 1, config.total_steps + 1)]


def test_an_unreachable_registry_stops_the_run_with_what_to_restart(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        TINY.read_text().replace("seed = 20260901", "seed = 20260901\nservice_retries = 1")
    )
    env_dead = "http://127.0.0.1:9"  # discard port: nothing listens
    done = run_train(
        path,
        tmp_path / "out",
        "--registry-url",
        env_dead,
        "--evaluator-url",
        env_dead,
        "--analyst-url",
        env_dead,
        timeout=300,
        TRAINER_REGISTRY_TOKEN="any",
    )
    assert done.returncode == 1
    assert "registry at http://127.0.0.1:9 is unreachable" in done.stderr
    assert "Restart it" in done.stderr and "rerun the same command" in done.stderr


@pytest.mark.slow
def test_an_interrupted_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    """Same seed, same folder path (the run id, and with it the simulated outcomes, derive from
    it): killed inside round 1 and resumed, the run ends with the uninterrupted run's weights
    and optimizer state, bit for bit (one thread each, so the CPU sums in one order)."""
    from safetensors.torch import load_file

    config = TrainerConfig.from_toml(TINY)
    out = tmp_path / "run"
    with analyst_standin(tmp_path / "standin-whole") as analyst:
        done = run_train(TINY, out, "--analyst-url", analyst)
    assert done.returncode == 0, done.stderr[-3000:]
    whole = out.rename(tmp_path / "uninterrupted")
    with analyst_standin(tmp_path / "standin-resumed") as analyst:
        interrupted_then_resumed(TINY, out, config, "--analyst-url", analyst)
    last = Path("checkpoints") / f"round-{config.rounds - 1:03d}"
    expected, got = (
        load_file(whole / last / "model.safetensors"),
        load_file(out / last / "model.safetensors"),
    )
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)
    expected = torch.load(whole / last / "optimizer.pt", weights_only=True)["state"]
    got = torch.load(out / last / "optimizer.pt", weights_only=True)["state"]
    for index, moments in expected.items():
        for key, value in moments.items():
            assert torch.equal(got[index][key], value), (index, key)
