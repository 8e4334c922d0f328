"""Several sampled episodes per test task: seeds never shared between samples or with the A/A
copies, sample 0 on the indices a one-sample test always used, and each condition read as its
per-task mean over samples (the task stays the unit of pairing)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.apps.experiment.evidence import build_evidence
from shared.apps.experiment.samples import pool_samples, with_samples
from shared.runtime.noise_floor import aa_condition


def test_every_sample_runs_under_its_own_seeds_and_sample_zero_keeps_its_indices():
    bare = {"name": "base/bare", "checkpoint_id": "c"}
    conditions = [bare, {**bare, "name": "base/s0", "bank_id": 3}, aa_condition(bare)]
    expanded = with_samples(conditions, 3)
    assert [c["name"] for c in expanded[:3]] == ["base/bare", "base/bare/sample1",
                                                  "base/bare/sample2"]  # fmt: skip
    by_name = {c["name"]: c for c in expanded}
    assert int(by_name["base/bare"].get("sample") or 0) == 0
    assert by_name["base/bare/aa"]["sample"] == aa_condition(bare)["sample"]
    # one condition's samples and its A/A copy's samples never share an index
    indices = [int(c.get("sample") or 0) for c in expanded if c["name"].startswith("base/bare")]
    assert len(indices) == 6 and len(set(indices)) == 6
    assert by_name["base/s0/sample2"]["bank_id"] == 3  # a sample is the same condition
    assert with_samples(conditions, 1) == conditions


def test_a_condition_with_another_sample_index_cannot_be_expanded():
    with pytest.raises(ValueError, match="sample 5"):
        with_samples([{"name": "x", "checkpoint_id": "c", "sample": 5}], 2)
    with pytest.raises(ValueError, match="at least 1"):
        with_samples([{"name": "x", "checkpoint_id": "c"}], 0)


def report(columns: dict[str, list[float]]) -> dict:
    return {
        "n_tasks": len(next(iter(columns.values()))),
        "conditions": {name: {} for name in columns},
        "comparisons": [{"a": "base/bare/aa", "b": "base/bare", "kind": "A/A"}],
        "per_task": {"task_ids": [f"t{i}" for i in range(len(next(iter(columns.values()))))],
                     "columns": {n: {"r_success": v} for n, v in columns.items()}},
    }  # fmt: skip


def test_a_conditions_column_is_its_per_task_mean_over_samples():
    pooled = pool_samples(report({
        "base/bare": [1, 0, 0], "base/bare/sample1": [1, 1, 0],
        "base/bare/aa": [0, 0, 1], "base/bare/aa/sample1": [0, 1, 1],
    }))  # fmt: skip
    assert pooled["samples"] == 2
    columns = pooled["per_task"]["columns"]
    assert sorted(columns) == ["base/bare", "base/bare/aa"]
    assert columns["base/bare"]["r_success"] == [1.0, 0.5, 0.0]
    assert columns["base/bare/aa"]["r_success"] == [0.0, 0.5, 1.0]
    assert pool_samples(report({"base/bare": [1, 0]}))["samples"] == 1


def test_conditions_with_unequal_samples_or_an_orphan_sample_are_refused():
    with pytest.raises(ValueError, match="different sample counts"):
        pool_samples(report({"a": [1], "a/sample1": [0], "b": [1]}))
    with pytest.raises(ValueError, match="no first sample"):
        pool_samples(report({"a": [1], "b/sample1": [0]}))


def test_evidence_reads_the_pooled_samples_and_says_how_many():
    """Two samples per task: the rows count tasks x samples episodes (a narrower Wilson interval
    than the tasks alone), the A/A row and the MDE read the pooled columns, and the verdict
    names the design."""
    rng = np.random.default_rng(5)
    draw = {name: rng.integers(0, 2, 100).astype(float).tolist()
            for name in ("base/bare", "base/bare/sample1", "base/s0", "base/s0/sample1",
                         "base/bare/aa", "base/bare/aa/sample1")}  # fmt: skip
    one = build_evidence(
        cards=[], gate_a=None, s0_size=1, arm="intraskill", phases_done=["base test"],
        evaluation=report({k: v for k, v in draw.items() if "sample1" not in k}),
    )  # fmt: skip
    two = build_evidence(
        cards=[], gate_a=None, s0_size=1, arm="intraskill", phases_done=["base test"],
        evaluation=report(draw),
    )  # fmt: skip
    assert (one["test"]["samples"], two["test"]["samples"]) == (1, 2)
    bare = np.mean([draw["base/bare"], draw["base/bare/sample1"]], axis=0)
    aa = np.mean([draw["base/bare/aa"], draw["base/bare/aa/sample1"]], axis=0)
    row = two["test"]["rows"][0]
    assert row["estimate"] == pytest.approx(bare.mean())
    width = lambda r: r["ci_high"] - r["ci_low"]  # noqa: E731
    assert width(row) < width(one["test"]["rows"][0])  # 200 episodes, not 100
    assert two["aa"]["estimate"] == pytest.approx((aa - bare).mean())
    assert two["mde_pp"] < one["mde_pp"]  # independent samples: less noise per task
    assert "100 tasks x 2 samples" in two["verdict"]
