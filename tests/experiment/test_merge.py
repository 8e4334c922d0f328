"""Two evaluator jobs on the same test tasks read as one report: columns stay paired by task
(a task either job dropped is dropped from both, with its reason), conditions are never
silently overwritten, and reports made under other bootstrap settings are refused."""

from __future__ import annotations

import pytest

from shared.apps.experiment.merge import MergeError, merge_reports

BOOT = {"resamples": 1000, "seed": 7, "level": 0.95, "paired_by": "task"}


def report(tasks, columns, *, dropped=(), boot=BOOT, failed=0) -> dict:
    return {
        "n_tasks": len(tasks),
        "requested_tasks": 4,
        "dropped": list(dropped),
        "bootstrap": boot,
        "conditions": {name: {"checkpoint_id": "c"} for name in columns},
        "comparisons": [{"a": name, "b": name} for name in columns],
        "failed_attempts": failed,
        "per_task": {
            "task_ids": list(tasks),
            "columns": {name: {"r_success": values} for name, values in columns.items()},
        },
    }


def test_columns_pair_by_task_on_the_tasks_both_kept() -> None:
    base = report(["t1", "t2", "t3"], {"base/bare": [1.0, 0.0, 1.0]},
                  dropped=[{"task_id": "t4", "missing": ["base/bare"]}], failed=1)  # fmt: skip
    trained = report(["t1", "t3", "t4"], {"arm/bank": [0.0, 1.0, 1.0]}, failed=2)
    merged = merge_reports(base, trained)
    assert merged["per_task"]["task_ids"] == ["t1", "t3"]
    assert merged["per_task"]["columns"] == {
        "base/bare": {"r_success": [1.0, 1.0]},  # t1, t3 of the first job
        "arm/bank": {"r_success": [0.0, 1.0]},  # t1, t3 of the second
    }
    assert merged["n_tasks"] == 2 and merged["failed_attempts"] == 3
    missing = {d["task_id"] for d in merged["dropped"]}
    assert missing == {"t2", "t4"}  # t2: the second job dropped it; t4: the first did
    assert list(merged["conditions"]) == ["base/bare", "arm/bank"]
    assert len(merged["comparisons"]) == 2


def test_a_condition_in_both_reports_is_refused() -> None:
    one = report(["t1"], {"base/bare": [1.0]})
    with pytest.raises(MergeError, match="base/bare"):
        merge_reports(one, report(["t1"], {"base/bare": [0.0]}))


def test_reports_under_other_bootstrap_settings_are_refused() -> None:
    one = report(["t1"], {"a": [1.0]})
    other = report(["t1"], {"b": [1.0]}, boot={**BOOT, "seed": 8})
    with pytest.raises(MergeError, match="bootstrap"):
        merge_reports(one, other)
