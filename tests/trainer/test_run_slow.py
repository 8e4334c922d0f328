"""Slow: the paper preset with the simulated TEST DOUBLE policy (the method's exact counts), and
an evaluator that goes away at the gate (the run stops saying what to restart, then resumes)."""

from __future__ import annotations

import json

import pytest

from services.trainer.config import TrainerConfig
from tests.trainer.run_support import CONFIGS, analyst_standin, run_train
from tests.trainer.test_run_simulated import assert_complete_run

pytestmark = pytest.mark.slow


def test_paper_preset_with_the_simulated_policy_has_the_release_totals(tmp_path):
    out = tmp_path / "paper"
    with analyst_standin(tmp_path / "analyst-standin") as analyst:  # counts the trainer's calls
        done = run_train(
            CONFIGS / "paper.toml",
            out,
            "--policy",
            "simulated",
            "--analyst-url",
            analyst,
            timeout=3600,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    config = TrainerConfig.from_toml(CONFIGS / "paper.toml", policy="simulated")
    assert_complete_run(out, config)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # the method's release totals (reference implementation, section 1)
    assert len(lines) == 80
    assert sum(line["episodes_generated"] for line in lines) == 20_480
    assert sum(line["episodes_admitted"] for line in lines) == 10_240
    assert sum(line["optimizer_updates"] for line in lines) == 160


def test_an_evaluator_that_is_down_at_the_gate_stops_the_run_and_a_rerun_finishes(tmp_path):
    config_path = tmp_path / "config.toml"
    text = (CONFIGS / "simulated-small.toml").read_text()
    config_path.write_text(text.replace("seed = 20260901", "seed = 20260901\nservice_retries = 1"))
    out = tmp_path / "run"
    with analyst_standin(tmp_path / "analyst-standin") as analyst:
        standin = ("--analyst-url", analyst)
        done = run_train(
            config_path, out, "--evaluator-url", "http://127.0.0.1:9", "--rounds", "1", *standin
        )
        assert done.returncode == 1
        assert "evaluator at http://127.0.0.1:9 is unreachable" in done.stderr
        assert "intraskill gate serve" in done.stderr
        state = json.loads((out / "state.json").read_text())
        assert state["phase"] == "gate" and state["step"] == 3  # trained, checkpointed, compiled
        done = run_train(config_path, out, "--rounds", "1", *standin)  # a local evaluator now
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3]  # the gate ran; no step was redone


def test_the_cpu_preset_trains_smollm2_with_a_gate_end_to_end(tmp_path):
    """The real model on the CPU preset, one round: the warm start (built here or taken from its
    cache), SmolLM2 rollout steps in ShopSim, the real analyst, a checkpoint and a gate."""
    config = TrainerConfig.from_toml(CONFIGS / "cpu.toml").with_(rounds=1)
    out = tmp_path / "cpu"
    done = run_train(CONFIGS / "cpu.toml", out, "--rounds", "1", timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, config.steps_per_round + 1))
    for line in lines:  # the preset's counts, exactly: real episodes, not simulated ones
        assert line["episodes_admitted"] == config.groups_admitted * config.group_size
        assert line["episodes_generated"] % (config.groups_per_wave * config.group_size) == 0
        assert line["optimizer_updates"] == config.updates_per_step
    run = json.loads((out / "run.json").read_text())
    assert run["finished"] and len(run["rounds"]) == 1
    # the warm start reached the bar: the policy acts validly before GRPO starts
    after = run["warm_start"]["summary"]["val_after"]
    assert after["valid_action_rate"] >= 0.8, after
    [record] = run["rounds"]
    assert record["gate_status"] == "complete", record
    assert (out / "checkpoints" / "round-000" / "model.safetensors").is_file()
    assert record["funnel"]["all_wrong_groups"] == sum(line["all_wrong_groups"] for line in lines)
