"""Arm comparisons paired by task, pooled over seeds, with A/A rows, Holm and the MDE; the
report redraws.

Synthetic per-task outcomes with known answers: the reference arm succeeds on every task in
both seeds; the other arm on the first half of the tasks in one seed and on none in the other,
so per task its pooled success is 0.5 (first half) or 0 (second half). The A/A copies: the
reference again identical, grpo's copy succeeds on one more task in seed 0."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shared.apps.experiment import cli
from shared.apps.experiment.arms import parse_arms
from shared.apps.experiment.compare import build_comparison
from shared.apps.experiment.report import write_report

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
    "base/bare/aa": [1] + [0] * (N - 1),
    "intraskill/s0/bank/aa": [1] * N,
    "intraskill/s1/bank/aa": [1] * N,
    "grpo/s0/bank/aa": [1] * 6 + [0] * 4,
    "grpo/s1/bank/aa": [0] * N,
}


def run(arm: str, index: int, fingerprint: str | None = None) -> dict:
    return {
        "name": f"{arm}-seed{index}",
        "arm": arm,
        "seed_index": index,
        "seed": 100 + index,
        "conditions": {"bank": f"{arm}/s{index}/bank", "bare": f"{arm}/s{index}/bare"},
        "effective_config": {"seed": 100 + index, "q": 0.2, "gate": {"alias": f"a{index}"}},
        "fingerprint": fingerprint or f"fp-{arm}",
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
    return {
        "n_tasks": N,
        "conditions": conditions,
        "per_task": {"task_ids": [f"t{i}" for i in range(N)], "columns": columns},
        "comparisons": [],
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
    # Wilson at 10/10: [n / (n + z^2), 1], never the bootstrap's [1, 1]
    everything = result["arms"]["intraskill"]["test"]["bank"]["r_success"]
    assert everything["high"] == 1.0 and everything["low"] == pytest.approx(10 / 13.8415, 1e-4)
    bank = next(
        c for c in result["comparisons"] if c["policy"] == "bank" and c["kind"] == "contrast"
    )
    difference = bank["differences"]["r_success"]
    assert difference["estimate"] == pytest.approx(0.75)
    # per task the difference is 0.5 or 1: every paired resample's mean lies between them
    assert 0.5 <= difference["low"] < 0.75 < difference["high"] <= 1.0
    bare = next(c for c in result["comparisons"] if c["policy"] == "bare")
    assert bare["differences"]["r_success"]["estimate"] == pytest.approx(0.1 - 0.25)
    assert result["arms"]["grpo"]["effective_config"] == {"q": 0.2, "gate": {"alias": "a0"}}
    assert result["policy_is_test_double"] is True


def test_an_aa_row_per_arm_pooled_over_its_seeds_and_a_bare_one():
    aa = {c["b"]: c for c in comparison()["comparisons"] if c["kind"] == "A/A"}
    assert set(aa) == {"base/bare", "intraskill", "grpo"}
    assert aa["base/bare"]["differences"]["r_success"]["estimate"] == pytest.approx(0.1)
    # grpo's copy: one more success in seed 0, pooled over 2 seeds and 10 tasks: +0.05
    assert aa["grpo"]["differences"]["r_success"]["estimate"] == pytest.approx(0.05)
    same = aa["intraskill"]["differences"]["r_success"]
    assert (same["low"], same["high"]) == (0.0, 0.0) and "every paired difference is 0" in (
        same["note"]
    )


def test_every_contrast_has_holm_an_mde_and_a_verdict():
    result = comparison()
    contrasts = [c for c in result["comparisons"] if c["kind"] == "contrast"]
    assert len(contrasts) == 2  # grpo's bank and bare rows
    ps = [c["differences"]["r_success"]["p"] for c in contrasts]
    expected = sorted(ps)
    expected = [min(1.0, 2 * expected[0]), max(min(1.0, 2 * expected[0]), expected[1])]
    for row in contrasts:
        adjusted = row["adjusted"]
        assert adjusted["method"] == "holm" and adjusted["family"] == 2
        rank = sorted(ps).index(row["differences"]["r_success"]["p"])
        assert adjusted["r_success"]["p"] == pytest.approx(expected[rank])
        assert adjusted["r_success"]["reject"] == (expected[rank] <= 0.05)
        assert row["mde"]["r_success"] > 0 and row["verdict"]["r_success"]
    bank = next(c for c in contrasts if c["policy"] == "bank")
    assert bank["adjusted"]["r_success"]["reject"] and "differs" in bank["verdict"]["r_success"]
    power = result["power"]
    assert power["alpha"] == 0.05 and power["power"] == 0.8 and power["contrasts"] == 2
    # SE^2 = mean paired task variance / n + mean per-seed-difference variance / 2 seeds
    task = np.mean([c["variance"]["r_success"]["task"] for c in contrasts])
    seed = np.mean([c["variance"]["r_success"]["seed"] for c in contrasts])
    se = (task / N + seed / 2) ** 0.5
    assert power["mde"]["r_success"] == pytest.approx(2.80158 * se, rel=1e-4)
    assert "per-seed differences" in power["basis"]


def test_the_report_redraws_from_comparison_json(tmp_path, capsys):
    (tmp_path / "comparison.json").write_text(json.dumps(comparison()))
    markdown = write_report(tmp_path).read_text()
    assert "TEST DOUBLE" in markdown
    assert "intraskill/aa - intraskill (A/A: one condition" in markdown
    assert "+75.0 pp" in markdown
    assert "## What this experiment can detect" in markdown and "survives Holm" in markdown
    assert "\\* every paired difference is 0" in markdown
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
    same = next(c for c in result["comparisons"] if c["kind"] == "identical")
    assert same["identical"] == "by outcome" and "adjusted" not in same  # two arms, one outcome
    (tmp_path / "comparison.json").write_text(json.dumps(result))
    assert "intraskill - grpo (identical by outcome)" in write_report(tmp_path).read_text()
    # one seed alike is not enough: the pooled arms differ in the other
    del test["conditions"]["grpo/s1/bare"]["identical_to"]
    result = build_comparison(
        arms=ARMS, runs=runs, test=test, confirm=None, policy="procedural", base_config="x"
    )
    assert all(c["kind"] != "identical" for c in result["comparisons"])


def test_one_config_and_one_bank_is_identical_by_construction():
    """Two arms with one fingerprint (config and initial bank) are one run per seed by design."""
    test = evaluation()
    for index in (0, 1):
        test["conditions"][f"grpo/s{index}/bare"]["identical_to"] = f"intraskill/s{index}/bare"
    runs = [run(arm.name, i, fingerprint="fp-same") for i in range(2) for arm in ARMS]
    result = build_comparison(
        arms=ARMS, runs=runs, test=test, confirm=None, policy="procedural", base_config="x"
    )
    [same] = [c for c in result["comparisons"] if c["kind"] == "identical"]
    assert same["identical"] == "by construction"
