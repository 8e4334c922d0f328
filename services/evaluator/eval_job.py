"""The evaluation job: plan it from the registry, then rollouts, report JSON and plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from services.evaluator.eval_conditions import Condition, condition_from_bank
from services.evaluator.eval_folder import write_plan
from services.evaluator.eval_plot import plot_report
from services.evaluator.eval_report import evaluation_report
from services.evaluator.eval_run import PlannedEvaluation, run_evaluation
from services.evaluator.gate_job import RecordLog


def plan_eval_job(body, client, settings, task_ids: Sequence[str]) -> PlannedEvaluation:
    """Resolve each condition's bank from the registry (id or alias); checkpoints must exist."""
    names = [c.name for c in body.conditions]
    if len(set(names)) != len(names):
        raise ValueError("condition names must be distinct")
    conditions = [planned_condition(spec, client) for spec in body.conditions]
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


def planned_condition(spec, client) -> Condition:
    """One requested condition: its checkpoint exists, its bank (by id or alias) is frozen."""
    if spec.bank_id is not None and spec.bank_alias is not None:
        raise ValueError(f"condition {spec.name}: give bank_id or bank_alias, not both")
    client.get_checkpoint(spec.checkpoint_id)
    if spec.bank_id is None and spec.bank_alias is None:
        return Condition(spec.name, spec.checkpoint_id, sample=spec.sample)
    bank = (
        client.get_bank(spec.bank_id)
        if spec.bank_id is not None
        else client.get_bank_by_alias(spec.bank_alias)
    )
    if bank.content_hash is None:
        raise ValueError(f"condition {spec.name}: bank {bank.id} is not frozen")
    return condition_from_bank(spec.name, spec.checkpoint_id, bank, sample=spec.sample)


def eval_job(planned: PlannedEvaluation, *, runner_factory, client_factory):
    """The work of one evaluation job: rollouts, report JSON, plot."""

    def work(context) -> dict[str, Any]:
        write_plan(planned, context.folder)
        uris = checkpoint_uris(planned, client_factory)
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


def checkpoint_uris(planned: PlannedEvaluation, client_factory) -> dict[str, str]:
    """Where each condition's checkpoint lives, read from the registry."""
    client = client_factory()
    try:
        return {
            c.checkpoint_id: client.get_checkpoint(c.checkpoint_id).uri for c in planned.conditions
        }
    finally:
        client.close()
