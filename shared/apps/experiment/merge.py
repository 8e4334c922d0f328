"""One test report from two evaluator jobs on the same test tasks.

The experiment measures the base policy (bare, with S_0, and its A/A copy) as soon as S_0
exists, before any training, so a run stopped during training has already said what S_0 does
at the start checkpoint and how small an effect its test design can see. The trained
conditions come from a second job after training. Both jobs roll out the same test tasks with
episode seeds keyed by (task, sample) alone, so a condition's episodes do not depend on which
job ran it, and the two reports pair task by task like one job's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class MergeError(ValueError):
    """The two reports cannot be read as one (other split settings or a condition in both)."""


def merge_reports(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """`first` and `second` as one report, on the tasks both kept (a task dropped by either job
    is dropped from both, so every column stays paired by task)."""
    clash = set(first["conditions"]) & set(second["conditions"])
    if clash:
        raise MergeError(f"conditions in both reports: {sorted(clash)}")
    if first["bootstrap"] != second["bootstrap"]:
        raise MergeError(
            f"bootstrap settings differ: {first['bootstrap']} vs {second['bootstrap']}"
        )
    kept_second = set(second["per_task"]["task_ids"])
    tasks = [t for t in first["per_task"]["task_ids"] if t in kept_second]
    columns = {
        **_restrict(first["per_task"], tasks),
        **_restrict(second["per_task"], tasks),
    }
    return {
        "n_tasks": len(tasks),
        "requested_tasks": max(first["requested_tasks"], second["requested_tasks"]),
        "dropped": _dropped(first, second, tasks),
        "bootstrap": first["bootstrap"],
        "conditions": {**first["conditions"], **second["conditions"]},
        # each job's comparisons, computed on its own kept tasks
        "comparisons": [*first["comparisons"], *second["comparisons"]],
        "failed_attempts": first["failed_attempts"] + second["failed_attempts"],
        "per_task": {"task_ids": tasks, "columns": columns},
        "merged_from": 2,
    }


def _restrict(per_task: Mapping[str, Any], tasks: list[str]) -> dict[str, dict[str, list]]:
    index = {task: i for i, task in enumerate(per_task["task_ids"])}
    rows = [index[t] for t in tasks]
    return {
        name: {field: [values[i] for i in rows] for field, values in fields.items()}
        for name, fields in per_task["columns"].items()
    }


def _dropped(first, second, tasks: list[str]) -> list[dict[str, Any]]:
    """Every task either job dropped (with its reason), then tasks one job kept and the other
    dropped, so the merged report says why each requested task is missing."""
    dropped = [*first["dropped"], *second["dropped"]]
    named = {d["task_id"] for d in dropped}
    kept = set(tasks)
    for report in (first, second):
        for task in report["per_task"]["task_ids"]:
            if task not in kept and task not in named:
                dropped.append({"task_id": task, "missing": ["dropped by the other job"]})
                named.add(task)
    return dropped
