"""Running an evaluation: every condition's rollouts, one checkpoint (one backend) at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.evaluator.eval_conditions import Condition, distinct_conditions
from services.evaluator.gate_run import run_with_retries
from services.evaluator.pairing import IdentityMismatch, RolloutRecord, RolloutRequest
from shared.contracts.chunks import InjectedChunk


@dataclass(frozen=True)
class PlannedEvaluation:
    conditions: tuple[Condition, ...]
    task_ids: tuple[str, ...]
    split: str
    comparisons: tuple[tuple[str, str], ...] | None
    resamples: int
    seed: int
    max_retries: int


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


def run_evaluation(
    planned: PlannedEvaluation,
    runner_for: Callable[[str], Any],
    *,
    on_record=None,
    progress=None,
) -> list[RolloutRecord]:
    """Every condition's rollouts, one checkpoint (one backend) at a time, failures retried."""
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
