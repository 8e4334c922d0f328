"""Test-set evaluation: several conditions on the same tasks, with task-paired bootstrap intervals.

The reference's four conditions are base/bare, base/S0, trained/bare and trained/S_T (the
frozen final bank), one completed rollout per task each on the test split. For every condition
we report the strict reward, success, every reward component, steps, protocol errors and tokens;
for every comparison (a - b) a task-paired percentile bootstrap interval: tasks are resampled
with replacement and the same resampled tasks enter both conditions. 10,000 resamples by
default, each (comparison, metric) with its own seed derived from the base seed.

The statistics (`task_table`, `paired_bootstrap`, `evaluation_report`, `plot_report`) are pure
and take rollout records; `eval_job` runs the rollouts.

The noise floor: conditions identical by construction (same checkpoint, same injected chunks,
same sampling index) are rolled out once; the others are reported with `identical_to` and their
comparisons as `identical_by_construction`. A condition with another `sample` index is the same
condition under other sampling seeds: an A/A comparison against it shows the sampling noise of
the task set beside every real difference.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from services.evaluator.fit import COMPONENTS
from services.evaluator.pairing import (
    IdentityMismatch,
    PairingError,
    RolloutRecord,
    RolloutRequest,
    completed_record,
)
from shared.contracts.chunks import InjectedChunk
from shared.runtime.paired_bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Metric,
    derived_seed,
    paired_bootstrap,
)

PAPER_CONDITIONS = ("base/bare", "base/S0", "trained/bare", "trained/S_T")
# What every condition shares; checkpoint and model differ between base and trained by design.
IDENTITY_SHARED_ACROSS_CONDITIONS = (
    "decoding",
    "prompt_version",
    "prompt_fingerprint",
    "env_version",
    "action_protocol",
    "split",
)
PAPER_COMPARISONS: tuple[tuple[str, str], ...] = (
    ("trained/bare", "base/bare"),
    ("base/S0", "base/bare"),
    ("trained/S_T", "trained/bare"),
    ("trained/S_T", "base/bare"),
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


@dataclass(frozen=True)
class Condition:
    """A checkpoint, and the bank whose every chunk is injected (none: bare).

    `chunk_ids` ("slug@version", bank order) is derived from `chunks`; a report rebuilt from
    stored records gives the ids alone. `sample` indexes the sampling seeds (episode seeds are
    derived from task and sample): the same condition with another sample is an A/A control.
    """

    name: str
    checkpoint_id: str
    chunks: tuple[InjectedChunk, ...] = ()
    bank_id: int | None = None
    chunk_ids: tuple[str, ...] = ()
    sample: int = 0

    def __post_init__(self) -> None:
        derived = tuple(f"{chunk.chunk_id}@{chunk.version}" for chunk in self.chunks)
        if self.chunks and self.chunk_ids and self.chunk_ids != derived:
            raise ValueError(f"condition {self.name}: chunk_ids disagree with chunks")
        if self.chunks:
            object.__setattr__(self, "chunk_ids", derived)

    @property
    def included(self) -> tuple[str, ...]:
        return self.chunk_ids

    @property
    def rollout_key(self) -> tuple[str, tuple[str, ...], int]:
        """What decides its rollouts: two conditions with one key are one condition."""
        return (self.checkpoint_id, self.chunk_ids, self.sample)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint_id": self.checkpoint_id,
            "bank_id": self.bank_id,
            "chunk_ids": list(self.chunk_ids),
            "sample": self.sample,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Condition:
        return cls(
            name=str(data["name"]),
            checkpoint_id=str(data["checkpoint_id"]),
            bank_id=data.get("bank_id"),
            chunk_ids=tuple(data.get("chunk_ids") or ()),
            sample=int(data.get("sample") or 0),
        )


def identical_conditions(conditions: Sequence[Condition]) -> dict[str, str]:
    """Each condition's name -> the first condition with the same rollout key (itself if none)."""
    first: dict[tuple, str] = {}
    return {c.name: first.setdefault(c.rollout_key, c.name) for c in conditions}


def distinct_conditions(conditions: Sequence[Condition]) -> list[Condition]:
    """The conditions that need rollouts of their own (identical ones are rolled out once)."""
    canonical = identical_conditions(conditions)
    return [c for c in conditions if canonical[c.name] == c.name]


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
        missing = []
        for condition in conditions:
            attempts = grouped.get((condition.name, task_id), [])
            record = completed_record(attempts, what=f"condition {condition.name} task {task_id}")
            if record is None:
                missing.append(condition.name)
            else:
                if tuple(record.injected) != condition.included:
                    raise PairingError(
                        f"condition {condition.name} task {task_id}: injected "
                        f"{list(record.injected)}, the bank has {list(condition.included)}"
                    )
                chosen[(condition.name, task_id)] = record
        if missing:
            dropped.append({"task_id": task_id, "missing": missing})
        else:
            kept.append(task_id)
    columns = {
        condition.name: {
            name: np.array([_field(chosen[(condition.name, t)], name) for t in kept], dtype=float)
            for name in FIELDS
        }
        for condition in conditions
    }
    return TaskTable(tuple(kept), columns, dropped)


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
    names = [c.name for c in conditions]
    if comparisons is None:
        comparisons = [pair for pair in PAPER_COMPARISONS if set(pair) <= set(names)]
        comparisons += [pair for pair in [aa_comparison(conditions)] if pair is not None]
    for a, b in comparisons:
        for name in (a, b):
            if name not in names:
                raise ValueError(f"comparison names unknown condition {name!r}")
    canonical = identical_conditions(conditions)
    table = task_table(records, distinct_conditions(conditions), task_ids)
    for name, same in canonical.items():
        table.columns[name] = table.columns[same]
    report: dict[str, Any] = {
        "n_tasks": len(table.task_ids),
        "requested_tasks": len(task_ids),
        "dropped": table.dropped,
        "bootstrap": {"resamples": resamples, "seed": seed, "level": level, "paired_by": "task"},
        "conditions": {},
        "comparisons": [],
        "failed_attempts": sum(r.status == "failed" for r in records),
    }
    for condition in conditions:
        columns = table.columns[condition.name]
        report["conditions"][condition.name] = {
            "checkpoint_id": condition.checkpoint_id,
            "bank_id": condition.bank_id,
            "chunks": list(condition.included),
            "sample": condition.sample,
            "identical_to": _other(canonical[condition.name], condition.name),
            "metrics": {m.name: float(m.value(columns)) for m in METRICS} if table.task_ids else {},
        }
    # per task, so arms evaluated here can be compared by task elsewhere (`intraskill experiment`)
    report["per_task"] = {
        "task_ids": list(table.task_ids),
        "columns": {
            c.name: {name: table.columns[c.name][name].tolist() for name in FIELDS}
            for c in conditions
        },
    }
    if not table.task_ids:
        return report
    for a, b in comparisons:
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
        report["comparisons"].append(
            {
                "a": a,
                "b": b,
                "kind": comparison_kind(conditions, a, b),
                "differences": differences,
                "flips": flips(table.columns[a], table.columns[b]),
            }
        )
    return report


def _other(name: str, own: str) -> str | None:
    return None if name == own else name


def comparison_kind(conditions: Sequence[Condition], a: str, b: str) -> str:
    """identical (one condition by construction: the difference is 0 by definition), A/A (one
    condition, other sampling seeds: the noise floor) or contrast (a real difference)."""
    by_name = {c.name: c for c in conditions}
    left, right = by_name[a], by_name[b]
    if left.rollout_key == right.rollout_key:
        return "identical"
    if left.rollout_key[:2] == right.rollout_key[:2]:
        return "A/A"
    return "contrast"


def aa_comparison(conditions: Sequence[Condition]) -> tuple[str, str] | None:
    """The first (A/A condition, its original) pair among `conditions`, if there is one."""
    for a in conditions:
        for b in conditions:
            if a.sample != b.sample and a.rollout_key[:2] == b.rollout_key[:2] and b.sample == 0:
                return (a.name, b.name)
    return None


def plot_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Condition means (strict, success) and comparison intervals for the main metrics."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    names = list(report["conditions"])
    ax = axes[0]
    width = 0.38
    for offset, metric in ((-width / 2, "r_strict"), (width / 2, "r_success")):
        values = [report["conditions"][n]["metrics"].get(metric, np.nan) for n in names]
        ax.bar(np.arange(len(names)) + offset, values, width, label=metric)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylim(0, 1)
    ax.set_title(f"Test split, {report['n_tasks']} tasks")
    ax.legend()

    ax = axes[1]
    shown = ("r_strict", "r_success", "r_loose")
    labels, estimates, lows, highs = [], [], [], []
    for comparison in report["comparisons"]:
        for metric in shown:
            d = comparison["differences"][metric]
            labels.append(f"{comparison['a']} - {comparison['b']}: {metric}")
            estimates.append(d["estimate"])
            lows.append(d["estimate"] - d["low"])
            highs.append(d["high"] - d["estimate"])
    ys = np.arange(len(labels))[::-1]
    ax.errorbar(estimates, ys, xerr=[lows, highs], fmt="o", capsize=3)
    ax.axvline(0, color="k", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    level = report["bootstrap"]["level"]
    ax.set_title(
        f"Paired differences, {level:.0%} bootstrap ({report['bootstrap']['resamples']:,})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def evaluation_requests(
    conditions: Sequence[Condition], task_ids: Sequence[str]
) -> list[RolloutRequest]:
    return [
        RolloutRequest(
            task_id, c.sample, "masked" if c.included else "bare", c.included, condition=c.name
        )
        for c in distinct_conditions(conditions)
        for task_id in task_ids
    ]


def chunk_map(conditions: Sequence[Condition]) -> dict[str, InjectedChunk]:
    return {f"{ch.chunk_id}@{ch.version}": ch for c in conditions for ch in c.chunks}


# ---------------------------------------------------------------- running it


@dataclass(frozen=True)
class PlannedEvaluation:
    conditions: tuple[Condition, ...]
    task_ids: tuple[str, ...]
    split: str
    comparisons: tuple[tuple[str, str], ...] | None
    resamples: int
    seed: int
    max_retries: int


def condition_from_bank(name: str, checkpoint_id: str, bank, *, sample: int = 0) -> Condition:
    """A condition injecting every chunk of a registry bank (a `BankPublic`), in bank order."""
    entries = sorted(bank.entries, key=lambda e: e.position)
    chunks = tuple(
        InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in entries
    )
    return Condition(name, checkpoint_id, chunks, bank.id, sample=sample)


def plan_eval_job(body, client, settings, task_ids: Sequence[str]) -> PlannedEvaluation:
    """Resolve each condition's bank from the registry (id or alias); checkpoints must exist."""
    conditions = []
    names = [c.name for c in body.conditions]
    if len(set(names)) != len(names):
        raise ValueError("condition names must be distinct")
    for spec in body.conditions:
        if spec.bank_id is not None and spec.bank_alias is not None:
            raise ValueError(f"condition {spec.name}: give bank_id or bank_alias, not both")
        client.get_checkpoint(spec.checkpoint_id)
        if spec.bank_id is None and spec.bank_alias is None:
            conditions.append(Condition(spec.name, spec.checkpoint_id, sample=spec.sample))
            continue
        bank = (
            client.get_bank(spec.bank_id)
            if spec.bank_id is not None
            else client.get_bank_by_alias(spec.bank_alias)
        )
        if bank.content_hash is None:
            raise ValueError(f"condition {spec.name}: bank {bank.id} is not frozen")
        conditions.append(
            condition_from_bank(spec.name, spec.checkpoint_id, bank, sample=spec.sample)
        )
    comparisons = None if body.comparisons is None else tuple(tuple(p) for p in body.comparisons)
    for pair in comparisons or ():
        for name in pair:
            if name not in names:
                raise ValueError(f"comparison names unknown condition {name!r}")
    return PlannedEvaluation(
        tuple(conditions),
        tuple(task_ids),
        body.split,
        comparisons,  # type: ignore[arg-type]
        body.resamples or settings.bootstrap_resamples,
        settings.bootstrap_seed if body.seed is None else body.seed,
        settings.max_retries if body.max_retries is None else body.max_retries,
    )


def run_evaluation(
    planned: PlannedEvaluation,
    runner_for: Callable[[str], Any],
    *,
    on_record=None,
    progress=None,
) -> list[RolloutRecord]:
    """Every condition's rollouts, one checkpoint (one backend) at a time, failures retried."""
    from services.evaluator.gate_run import run_with_retries

    records: list[RolloutRecord] = []
    checkpoints = list(dict.fromkeys(c.checkpoint_id for c in planned.conditions))
    for checkpoint_id in checkpoints:
        runner = runner_for(checkpoint_id)
        group = [c for c in planned.conditions if c.checkpoint_id == checkpoint_id]
        if runner.identity.checkpoint_id != checkpoint_id:
            raise IdentityMismatch(
                "checkpoint_id", checkpoint_id, runner.identity.checkpoint_id, "evaluation backend"
            )
        records += run_with_retries(
            runner,
            evaluation_requests(group, planned.task_ids),
            chunk_map(group),
            max_retries=planned.max_retries,
            on_record=on_record,
            progress=progress,
            stage=f"rollouts {checkpoint_id}",
        )
    return records


PLAN_FILE = "plan.json"


def write_plan(planned: PlannedEvaluation, folder: Path) -> None:
    """What a report needs besides the records: conditions, tasks, comparisons, bootstrap."""
    plan = {
        "conditions": [c.as_dict() for c in planned.conditions],
        "task_ids": list(planned.task_ids),
        "split": planned.split,
        "comparisons": None
        if planned.comparisons is None
        else [list(p) for p in planned.comparisons],
        "resamples": planned.resamples,
        "seed": planned.seed,
    }
    (Path(folder) / PLAN_FILE).write_text(json.dumps(plan, indent=1))


def report_from_folder(
    folder: str | Path, *, resamples: int | None = None, seed: int | None = None
) -> dict[str, Any]:
    """Recompute an evaluation's report from its folder (plan.json + records.jsonl)."""
    from services.evaluator.gate_job import read_records

    folder = Path(folder)
    plan = json.loads((folder / PLAN_FILE).read_text())
    conditions = [Condition.from_dict(c) for c in plan["conditions"]]
    comparisons = plan.get("comparisons")
    return evaluation_report(
        read_records(folder / "records.jsonl"),
        conditions,
        plan["task_ids"],
        comparisons=None if comparisons is None else [tuple(p) for p in comparisons],
        resamples=resamples or plan["resamples"],
        seed=plan["seed"] if seed is None else seed,
    )


def eval_job(planned: PlannedEvaluation, *, runner_factory, client_factory):
    """The work of one evaluation job: rollouts, report JSON, plot."""
    from services.evaluator.gate_job import RecordLog

    def work(context) -> dict[str, Any]:
        write_plan(planned, context.folder)
        client = client_factory()
        try:
            uris = {
                c.checkpoint_id: client.get_checkpoint(c.checkpoint_id).uri
                for c in planned.conditions
            }
        finally:
            client.close()
        records = run_evaluation(
            planned,
            lambda checkpoint_id: runner_factory(checkpoint_id, uris[checkpoint_id], planned.split),
            on_record=RecordLog(context.folder / "records.jsonl"),
            progress=context.progress,
        )
        context.progress("bootstrap", 0, 1)
        report = evaluation_report(
            records,
            planned.conditions,
            planned.task_ids,
            comparisons=planned.comparisons,
            resamples=planned.resamples,
            seed=planned.seed,
        )
        (context.folder / "evaluation.json").write_text(json.dumps(report, indent=1))
        plot_report(report, context.folder / "evaluation.png")
        return {**report, "files": ["evaluation.json", "evaluation.png", "records.jsonl"]}

    return work
