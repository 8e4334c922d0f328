"""Arm comparisons paired by task, pooled over seeds, with the A/A row; the report redraws.

Synthetic per-task outcomes with known answers: the reference arm succeeds on every task in
both seeds; the other arm on the first half of the tasks in one seed and on none in the other,
so per task its pooled success is 0.5 (first half) or 0 (second half)."""

from __future__ import annotations

import json

import pytest

from shared.experiment import cli
from shared.experiment.arms import parse_arms
from shared.experiment.compare import build_comparison
from shared.experiment.report import write_report

N = 10
ARMS = parse_arms("intraskill,grpo")
OUTCOMES = {
    "intraskill/s0/bank": [1] * N,
    "intraskill/s1/bank": [1] * N,
    "intraskill/s0/bare": [0] * N,
    "intraskill/s1/bare": [1] * 2 + [0] * (N - 2),
    "grpo/s0/bank": [1] * 5 + [0] * 5,
    "grpo/s1/bank": [0] * N,
    "grpo/s0/bare": [1] * 5 + [0] * 5,
    "grpo/s1/bare": [0] * N,
    "base/bare": [0] * N,
}


def run(arm: str, index: int) -> dict:
    return {
        "name": f"{arm}-seed{index}",
        "arm": arm,
        "seed_index": index,
        "seed": 100 + index,
        "conditions": {"bank": f"{arm}/s{index}/bank", "bare": f"{arm}/s{index}/bare"},
        "effective_config": {"seed": 100 + index, "q": 0.2, "gate": {"alias": f"a{index}"}},
        "fingerprint": f"fp-{arm}",
        "final": {"bank_size": 2, "gate_estimate": 0.3, "bank_id": 5, "checkpoint_id": "c"},
        "rounds": [
            {
                "round": 0,
                "bank_size": 1,
                "next_bank_size": 2,
                "adopted": True,
                "candidates": 1,
                "gate_status": "complete",
            },
        ],
        "curve": [{"step": s, "success": 0.1 * s} for s in (1, 2, 3)],
    }


def evaluation() -> dict:
    columns = {n: {"r_success": v, "r_strict": v} for n, v in OUTCOMES.items()}
    conditions = {n: {"metrics": {"r_success": sum(v) / N}} for n, v in OUTCOMES.items()}
    for name in ("grpo/s0/bank", "grpo/s1/bank"):
        conditions[name]["identical_to"] = name.replace("bank", "bare")
    aa = {"estimate": 0.1, "low": -0.1, "high": 0.3}
    return {
        "n_tasks": N,
        "conditions": conditions,
        "per_task": {"task_ids": [f"t{i}" for i in range(N)], "columns": columns},
        "comparisons": [
            {
                "a": "intraskill/s0/bank/aa",
                "b": "intraskill/s0/bank",
                "kind": "A/A",
                "differences": {"r_success": aa, "r_strict": aa},
            },
        ],
    }


def comparison() -> dict:
    runs = [run(arm.name, i) for i in range(2) for arm in ARMS]
    return build_comparison(
        arms=ARMS, runs=runs, test=evaluation(), confirm=None, policy="procedural", base_config="x"
    )


def test_arms_are_pooled_over_seeds_and_paired_by_task():
    result = comparison()
    grpo = result["arms"]["grpo"]["test"]["bank"]
    assert grpo["r_success"]["estimate"] == pytest.approx(0.25)  # (5 x 0.5) / 10
    assert grpo["per_seed"] == [0.5, 0.0]
    assert grpo["identical_to"] == ["grpo/s0/bare", "grpo/s1/bare"]
    assert result["arms"]["intraskill"]["test"]["bank"]["r_success"] == {
        "estimate": 1.0, "low": 1.0, "high": 1.0,
    }  # fmt: skip
    bank = next(
        c for c in result["comparisons"] if c["policy"] == "bank" and c["kind"] == "contrast"
    )
    difference = bank["differences"]["r_success"]
    assert difference["estimate"] == pytest.approx(0.75)
    # per task the difference is 0.5 or 1: every paired resample's mean lies between them
    assert 0.5 <= difference["low"] < 0.75 < difference["high"] <= 1.0
    bare = next(c for c in result["comparisons"] if c["policy"] == "bare")
    assert bare["differences"]["r_success"]["estimate"] == pytest.approx(0.1 - 0.25)
    aa = [c for c in result["comparisons"] if c["kind"] == "A/A"]
    assert len(aa) == 1 and aa[0]["differences"]["r_success"]["low"] == -0.1
    assert result["arms"]["grpo"]["effective_config"] == {"q": 0.2, "gate": {"alias": "a0"}}
    assert result["policy_is_test_double"] is True


def test_the_report_redraws_from_comparison_json(tmp_path, capsys):
    (tmp_path / "comparison.json").write_text(json.dumps(comparison()))
    markdown = write_report(tmp_path).read_text()
    assert "TEST DOUBLE" in markdown
    assert "intraskill/s0/bank/aa - intraskill/s0/bank (A/A: one condition" in markdown
    assert "+75.0 pp" in markdown
    assert "evaluated once: the rollouts of grpo/s0/bare, grpo/s1/bare" in markdown
    for name in ("learning-curves", "test-success", "banks"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 10_000
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "## Paired differences" in capsys.readouterr().out
    assert cli.main(["report", str(tmp_path / "missing")]) == 1


def test_arms_whose_conditions_were_rolled_out_as_one_are_identical_not_a_contrast(tmp_path):
    """Two arms that trained to the same weights are tested under one checkpoint, so the
    evaluator rolls their conditions out once (`identical_to`): their row is no contrast."""
    test = evaluation()
    for index in (0, 1):
        test["conditions"][f"grpo/s{index}/bare"]["identical_to"] = f"intraskill/s{index}/bare"
    runs = [run(arm.name, i) for i in range(2) for arm in ARMS]
    result = build_comparison(
        arms=ARMS, runs=runs, test=test, confirm=None, policy="procedural", base_config="x"
    )
    kinds = {c["policy"]: c["kind"] for c in result["comparisons"] if c["kind"] != "A/A"}
    assert kinds == {"bare": "identical", "bank": "contrast"}
    (tmp_path / "comparison.json").write_text(json.dumps(result))
    assert "intraskill - grpo (identical)" in write_report(tmp_path).read_text()
    # one seed alike is not enough: the pooled arms differ in the other
    del test["conditions"]["grpo/s1/bare"]["identical_to"]
    result = build_comparison(
        arms=ARMS, runs=runs, test=test, confirm=None, policy="procedural", base_config="x"
    )
    assert all(c["kind"] != "identical" for c in result["comparisons"])
