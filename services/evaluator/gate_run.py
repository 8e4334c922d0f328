"""Running one gate: design check, paired rollouts with retries, pairing, fit and selection.

    plan = GatePlan(design, task_ids, chunks=...)
    outcome = run_gate(plan, runner)            # runner: AgentRolloutRunner or a test double
    outcome.status                              # complete | incomplete | failed

The order is the method's: the design's full column rank is checked before any rollout; a reused
bare run must match the gate's identity before anything starts; failed attempts are retried (at
most `max_retries` more times); tasks still without both rollouts are listed and make the gate
incomplete; the fit refuses records whose identity differs. Registry writes live apart, in
`gate_planning.py`, `gate_recording.py` and `gate_adoption.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from services.evaluator.decision import AdmitRule, GateDecision, decide
from services.evaluator.design import (
    DesignError,
    GateDesign,
    check_full_rank,
    design_matrix,
    included_ids,
    mask_row,
)
from services.evaluator.fit import FitError, Solver
from services.evaluator.pairing import (
    PairingResult,
    RolloutRecord,
    RolloutRequest,
    check_identity,
    pair_records,
)
from services.evaluator.rollouts import OnRecord, RolloutRunner
from shared.contracts.chunks import InjectedChunk

GateOutcomeStatus = Literal["complete", "incomplete", "failed"]
Progress = Callable[[str, int, int], None]
DEFAULT_MAX_RETRIES = 2


@dataclass(frozen=True)
class GatePlan:
    """Everything a gate run is fixed to before its first rollout."""

    design: GateDesign
    task_ids: tuple[str, ...]
    chunks: Mapping[str, InjectedChunk] = field(default_factory=dict)  # intervention id -> chunk
    sample: int = 0
    max_retries: int = DEFAULT_MAX_RETRIES
    solver: Solver = "statsmodels"
    admit: AdmitRule = "coefficient"  # which chunks the gate may admit (decision.AdmitRule)

    def __post_init__(self) -> None:
        if len(set(self.task_ids)) != len(self.task_ids):
            raise DesignError("validation task ids must be distinct")
        if self.max_retries < 0:
            raise DesignError("max_retries must be >= 0")

    def check(self) -> None:
        """The pre-rollout checks: full column rank, and content for every injected version."""
        check_full_rank(design_matrix(self.design, self.task_ids, self.sample))


@dataclass
class GateOutcome:
    status: GateOutcomeStatus
    records: list[RolloutRecord]
    pairing: PairingResult | None
    decision: GateDecision | None
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "rollouts": len(self.records),
            "failed_attempts": sum(r.status == "failed" for r in self.records),
        }
        if self.pairing is not None:
            data["paired"] = len(self.pairing.observations)
            data["unpaired"] = list(self.pairing.unpaired)
        if self.decision is not None:
            data["decision"] = self.decision.as_json(intervals=True)
        return data


def run_with_retries(
    runner: RolloutRunner,
    requests: Sequence[RolloutRequest],
    chunks: Mapping[str, InjectedChunk],
    *,
    max_retries: int,
    on_record: OnRecord | None = None,
    progress: Progress | None = None,
    stage: str = "rollouts",
) -> list[RolloutRecord]:
    """Run every request; rerun the ones that failed technically, up to `max_retries` times."""
    records: list[RolloutRecord] = []
    pending = list(requests)
    total = len(requests)
    done = 0
    for attempt in range(max_retries + 1):
        if not pending:
            break
        batch = [
            RolloutRequest(
                r.task_id, r.sample, r.arm, r.included, r.inclusion, attempt, r.condition
            )
            for r in pending
        ]

        def seen(record: RolloutRecord) -> None:
            nonlocal done
            if on_record is not None:
                on_record(record)
            if record.status == "completed":
                done += 1
            if progress is not None:
                progress(stage, done, total)

        results = runner.run(batch, chunks, seen)
        records += results
        pending = [r for r, rec in zip(batch, results, strict=True) if rec.status == "failed"]
    return records


def gate_requests(plan: GatePlan, *, bare: bool = True) -> list[RolloutRequest]:
    """The masked rollout of every task, and the bare one unless a bare run is reused."""
    requests = []
    for task_id in plan.task_ids:
        if bare:
            requests.append(RolloutRequest(task_id, plan.sample, "bare"))
        mask = mask_row(plan.design, task_id, plan.sample)
        requests.append(
            RolloutRequest(task_id, plan.sample, "masked", included_ids(plan.design, mask), mask)
        )
    return requests


def run_gate(
    plan: GatePlan,
    runner: RolloutRunner,
    *,
    bare_records: Sequence[RolloutRecord] | None = None,
    on_record: OnRecord | None = None,
    progress: Progress | None = None,
) -> GateOutcome:
    """Run a gate end to end (see the module docstring); raises before any rollout on a bad plan."""
    plan.check()
    identity = runner.identity
    if identity.split != plan.design.split:
        raise DesignError(
            f"split differs: the runner runs {identity.split!r}, the gate is on "
            f"{plan.design.split!r}"
        )
    missing = sorted({vid for vid in plan.design.column_ids if vid not in plan.chunks})
    if plan.chunks and missing:
        raise DesignError(f"no chunk content for {', '.join(missing)}")
    reused: list[RolloutRecord] = []
    if bare_records is not None:
        for record in bare_records:
            check_identity(identity, record.identity, context="reused bare run")
        reused = [r for r in bare_records if r.task_id in set(plan.task_ids)]
    covered = {r.task_id for r in reused if r.status == "completed"}
    requests = [r for r in gate_requests(plan) if not (r.arm == "bare" and r.task_id in covered)]
    records = reused + run_with_retries(
        runner,
        requests,
        plan.chunks,
        max_retries=plan.max_retries,
        on_record=on_record,
        progress=progress,
        stage="gate rollouts",
    )
    pairing = pair_records(plan.design, identity, records, plan.task_ids, sample=plan.sample)
    try:
        decision = decide(plan.design, pairing.observations, solver=plan.solver, admit=plan.admit)
    except (FitError, DesignError) as error:
        return GateOutcome("failed" if not pairing.observations else "incomplete", records,
                           pairing, None, str(error))  # fmt: skip
    status: GateOutcomeStatus = "complete" if pairing.complete else "incomplete"
    error = None if pairing.complete else f"{len(pairing.unpaired)} task(s) unpaired"
    return GateOutcome(status, records, pairing, decision, error)
