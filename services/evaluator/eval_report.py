"""An evaluation's report: per-condition metrics and task-paired bootstrap differences.

For every condition the strict reward, success, every reward component, steps, protocol errors
and tokens; for every comparison (a - b) a task-paired percentile bootstrap interval: tasks are
resampled with replacement and the same resampled tasks enter both conditions. 10,000 resamples
by default, each (comparison, metric) with its own seed derived from the base seed. Pure: it
takes rollout records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.evaluator.eval_conditions import (
    PAPER_COMPARISONS,
    Condition,
    aa_comparison,
    comparison_kind,
    distinct_conditions,
    identical_conditions,
)
from services.evaluator.fit import COMPONENTS
from services.evaluator.pairing import (
    IDENTITY_FIELDS,
    IdentityMismatch,
    PairingError,
    RolloutRecord,
    completed_record,
)
from shared.runtime.paired_bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Metric,
    derived_seed,
    paired_bootstrap,
)

# What every condition shares; checkpoint and model differ between base and trained by design.
IDENTITY_SHARED_ACROSS_CONDITIONS = tuple(
    name for name in IDENTITY_FIELDS if name not in ("checkpoint_id", "model")
)

# Per-task fields every record yields.
FIELDS = (*COMPONENTS, "steps", "protocol_errors", "generated_tokens")


METRICS: tuple[Metric, ...] = (
    *(Metric(name, name) for name in COMPONENTS),
    Metric("steps", "steps"),
    Metric("protocol_errors", "protocol_errors"),  # per episode
    Metric("protocol_error_rate", "protocol_errors", "steps"),  # share of steps
    Metric("tokens", "generated_tokens"),  # generated per episode
    Metric("tokens_per_turn", "generated_tokens", "steps"),
)
METRIC_NAMES = tuple(metric.name for metric in METRICS)


@dataclass
class TaskTable:
    """Per condition, per field, one value per paired task (tasks in the same order)."""

    task_ids: tuple[str, ...]
    columns: dict[str, dict[str, np.ndarray]]
    dropped: list[dict[str, Any]] = field(default_factory=list)


def check_evaluation_identity(
    records: Sequence[RolloutRecord], conditions: Sequence[Condition]
) -> None:
    """All conditions share decoding, prompt layout, environment, protocol and split.

    Gate B's rule: the conditions may differ only in the skill block and, by design, the
    checkpoint; anything else differing aborts the comparison, naming the field.
    """
    checkpoint = {c.name: c.checkpoint_id for c in conditions}
    first: RolloutRecord | None = None
    for record in records:
        what = f"condition {record.condition} task {record.task_id}"
        if record.condition not in checkpoint:
            raise PairingError(f"{what}: not a condition of this evaluation")
        if record.identity.checkpoint_id != checkpoint[record.condition]:
            raise IdentityMismatch(
                "checkpoint_id", checkpoint[record.condition], record.identity.checkpoint_id, what
            )
        if first is None:
            first = record
            continue
        for name in IDENTITY_SHARED_ACROSS_CONDITIONS:
            left, right = getattr(first.identity, name), getattr(record.identity, name)
            if left != right:
                raise IdentityMismatch(name, left, right, what)


def task_table(
    records: Sequence[RolloutRecord], conditions: Sequence[Condition], task_ids: Sequence[str]
) -> TaskTable:
    """One completed rollout per (condition, task); tasks missing in any condition are dropped."""
    check_evaluation_identity(records, conditions)
    grouped: dict[tuple[str, str], list[RolloutRecord]] = {}
    for record in records:
        grouped.setdefault((record.condition, record.task_id), []).append(record)
    kept: list[str] = []
    chosen: dict[tuple[str, str], RolloutRecord] = {}
    dropped = []
    for task_id in task_ids:
        found = {c.name: _task_record(grouped, c, task_id) for c in conditions}
        missing = [name for name, record in found.items() if record is None]
        if missing:
            dropped.append({"task_id": task_id, "missing": missing})
            continue
        kept.append(task_id)
        chosen |= {(name, task_id): record for name, record in found.items()}
    columns = {
        condition.name: {
            name: np.array([_field(chosen[(condition.name, t)], name) for t in kept], dtype=float)
            for name in FIELDS
        }
        for condition in conditions
    }
    return TaskTable(tuple(kept), columns, dropped)


def _task_record(
    grouped: Mapping[tuple[str, str], list[RolloutRecord]], condition: Condition, task_id: str
) -> RolloutRecord | None:
    """The condition's completed rollout of the task (None: none completed); it must carry
    exactly the condition's chunks."""
    attempts = grouped.get((condition.name, task_id), [])
    record = completed_record(attempts, what=f"condition {condition.name} task {task_id}")
    if record is not None and tuple(record.injected) != condition.included:
        raise PairingError(
            f"condition {condition.name} task {task_id}: injected "
            f"{list(record.injected)}, the bank has {list(condition.included)}"
        )
    return record


def _field(record: RolloutRecord, name: str) -> float:
    if name in COMPONENTS:
        return float(record.components[name])
    return float(getattr(record, name))


def flips(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Tasks whose success changed from b to a."""
    sa, sb = a["r_success"] > 0.5, b["r_success"] > 0.5
    return {"fail_to_success": int(np.sum(sa & ~sb)), "success_to_fail": int(np.sum(~sa & sb))}


def evaluation_report(
    records: Sequence[RolloutRecord],
    conditions: Sequence[Condition],
    task_ids: Sequence[str],
    *,
    comparisons: Sequence[tuple[str, str]] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> dict[str, Any]:
    """Per-condition metrics and per-comparison paired bootstrap differences, as one JSON dict."""
    comparisons = checked_comparisons(conditions, comparisons)
    canonical = identical_conditions(conditions)
    table = task_table(records, distinct_conditions(conditions), task_ids)
    for name, same in canonical.items():
        table.columns[name] = table.columns[same]
    bootstrap = {"resamples": resamples, "seed": seed, "level": level}
    return {
        "n_tasks": len(table.task_ids),
        "requested_tasks": len(task_ids),
        "dropped": table.dropped,
        "bootstrap": {**bootstrap, "paired_by": "task"},
        "conditions": {c.name: condition_entry(c, canonical[c.name], table) for c in conditions},
        "comparisons": [
            comparison_entry(conditions, a, b, table, **bootstrap) for a, b in comparisons
        ]
        if table.task_ids
        else [],
        "failed_attempts": sum(r.status == "failed" for r in records),
        # per task, so arms evaluated here can be compared by task elsewhere (`experiment`)
        "per_task": {
            "task_ids": list(table.task_ids),
            "columns": {
                c.name: {name: table.columns[c.name][name].tolist() for name in FIELDS}
                for c in conditions
            },
        },
    }


def checked_comparisons(
    conditions: Sequence[Condition], comparisons: Sequence[tuple[str, str]] | None
) -> list[tuple[str, str]]:
    """The comparisons asked for, or by default the paper's among `conditions` and the A/A
    pair; ValueError when one names an unknown condition."""
    names = [c.name for c in conditions]
    if comparisons is None:
        comparisons = [pair for pair in PAPER_COMPARISONS if set(pair) <= set(names)]
        comparisons += [pair for pair in [aa_comparison(conditions)] if pair is not None]
    for a, b in comparisons:
        for name in (a, b):
            if name not in names:
                raise ValueError(f"comparison names unknown condition {name!r}")
    return list(comparisons)


def condition_entry(condition: Condition, same_as: str, table: TaskTable) -> dict[str, Any]:
    """A condition's report: what it injects, which condition it is by construction, metrics."""
    columns = table.columns[condition.name]
    return {
        "checkpoint_id": condition.checkpoint_id,
        "bank_id": condition.bank_id,
        "chunks": list(condition.included),
        "sample": condition.sample,
        "identical_to": None if same_as == condition.name else same_as,
        "metrics": {m.name: float(m.value(columns)) for m in METRICS} if table.task_ids else {},
    }


def comparison_entry(
    conditions: Sequence[Condition], a: str, b: str, table: TaskTable, *,
    resamples: int, seed: int, level: float,
) -> dict[str, Any]:  # fmt: skip
    """a - b on every metric, bootstrapped over the paired tasks, and the success flips."""
    differences = {
        metric.name: paired_bootstrap(
            table.columns[a],
            table.columns[b],
            metric,
            resamples=resamples,
            seed=derived_seed(seed, a, b, metric.name),
            level=level,
        )
        for metric in METRICS
    }
    return {
        "a": a,
        "b": b,
        "kind": comparison_kind(conditions, a, b),
        "differences": differences,
        "flips": flips(table.columns[a], table.columns[b]),
    }
