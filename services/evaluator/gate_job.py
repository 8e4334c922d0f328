"""What the evaluator's gate jobs do: one plain function for interval gates and Gate A alike.

The HTTP layer (`app.py`) and the CLI validate a request, plan synchronously what is cheap to
check (the registry's bank, candidates or drafts, the design's rank), then hand the rest to
`gate_job`: load the policy, check identities, open the registry gate run, run the paired
rollouts (`run_gate`), record the outcome (`record_gate`) and, unless the request keeps the
alias where it is, adopt the new bank (`adopt_bank`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.evaluator.decision import EmptyBankPolicy
from services.evaluator.design import DesignError
from services.evaluator.gate_adoption import adopt_bank, leave_alias
from services.evaluator.gate_planning import RegistryGate, plan_gate, plan_gate_a
from services.evaluator.gate_recording import (
    FRESH_BARE,
    bare_baseline,
    open_gate_run,
    record_gate,
)
from services.evaluator.gate_run import run_gate
from services.evaluator.pairing import (
    IdentityMismatch,
    RolloutIdentity,
    RolloutRecord,
    check_identity,
)
from services.evaluator.runtime import RunnerFactory
from services.evaluator.settings import EvaluatorSettings
from shared.contracts.evaluator_api.schemas import GateAJobCreate, GateJobCreate
from shared.contracts.registry_api.aliases import is_protected
from shared.contracts.registry_api.client import NotFound, RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import GateStatus
from shared.kit.service_jobs import JobContext

logger = logging.getLogger(__name__)
RECORDS_FILE = "records.jsonl"
GATE_JOB_KINDS = ("gate", "gate-a")  # job kinds whose bare rollouts a later gate may reuse


class RecordLog:
    """Append-only JSONL of rollout records, fsynced per line (a crash loses at most one, even
    a machine's)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __call__(self, record: RolloutRecord) -> None:
        line = json.dumps(record.as_dict(), ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def read_records(path: Path) -> list[RolloutRecord]:
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                records.append(RolloutRecord.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a rollout record ({error})") from None
    return records


@dataclass
class PlannedGate:
    request: GateJobCreate | GateAJobCreate
    gate: RegistryGate


def plan_gate_job(
    request: GateJobCreate,
    client: RegistryClient,
    settings: EvaluatorSettings,
    task_ids: Sequence[str],
) -> PlannedGate:
    """The registry reads and the pre-rollout design checks; raises on anything wrong."""
    check_references(request, client, settings)
    gate = plan_gate(
        client,
        task_ids=task_ids,
        round=request.round,
        alias=request.alias,
        base_bank_id=request.base_bank_id,
        candidate_ids=request.candidate_ids,
        mask_seed=settings.mask_seed if request.mask_seed is None else request.mask_seed,
        split=settings.split,
        budget=settings.budget if request.budget is None else request.budget,
        max_retries=settings.max_retries if request.max_retries is None else request.max_retries,
        solver=request.solver,
        admit=request.admit,
    )
    gate.plan.check()
    return PlannedGate(request, gate)


def plan_gate_a_job(
    request: GateAJobCreate,
    client: RegistryClient,
    settings: EvaluatorSettings,
    task_ids: Sequence[str],
) -> PlannedGate:
    """Gate A: the drafts from the registry and the pre-rollout design checks."""
    check_references(request, client, settings)
    gate = plan_gate_a(
        client,
        task_ids=task_ids,
        draft_version_ids=request.draft_version_ids,
        alias=request.alias,
        mask_seed=settings.mask_seed if request.mask_seed is None else request.mask_seed,
        split=settings.split,
        budget=request.budget,
        max_retries=settings.max_retries if request.max_retries is None else request.max_retries,
        solver=request.solver,
        admit=request.admit,
    )
    gate.plan.check()
    return PlannedGate(request, gate)


def check_references(
    request: GateJobCreate | GateAJobCreate, client: RegistryClient, settings: EvaluatorSettings
) -> None:
    """What the job will need and can be checked now, so it is a 422 at submit rather than a
    job that fails (or runs every rollout and then fails): the checkpoint exists, and the alias
    it would move is one the evaluator may move."""
    if request.move_alias and is_protected(request.alias, settings.protected_aliases):
        raise DesignError(
            f"alias {request.alias!r} is protected (or looks like a protected name): only an "
            "operator moves it; run the gate with move_alias false, or on another alias",
            field="alias",
        )
    try:
        client.get_checkpoint(request.checkpoint_id)
    except NotFound:
        raise DesignError(
            f"no checkpoint {request.checkpoint_id!r} in the registry", field="checkpoint_id"
        ) from None


def check_runner_identity(
    identity: RolloutIdentity, *, checkpoint_id: str, bare: Sequence[RolloutRecord]
) -> None:
    """Refuse to start when the runner serves another checkpoint or a reused bare run differs."""
    if identity.checkpoint_id != checkpoint_id:
        raise IdentityMismatch(
            "checkpoint_id", checkpoint_id, identity.checkpoint_id, "gate job vs policy backend"
        )
    for record in bare:
        check_identity(identity, record.identity, context="reused bare run")


def gate_job(
    planned: PlannedGate,
    *,
    client_factory: Callable[[], RegistryClient],
    runner_factory: RunnerFactory,
    jobs_root: Path,
    empty_bank: EmptyBankPolicy = "keep",
) -> Callable[[JobContext], dict[str, Any]]:
    """The work of one gate job, interval gate or Gate A (runs on a job thread). `empty_bank`
    applies unless the request sets its own."""
    request, gate = planned.request, planned.gate

    def work(context: JobContext) -> dict[str, Any]:
        client = client_factory()
        try:
            context.progress("loading policy", 0, 1)
            uri = client.get_checkpoint(request.checkpoint_id).uri
            runner = runner_factory(request.checkpoint_id, uri, gate.plan.design.split)
            bare: list[RolloutRecord] | None = None
            if request.bare_from_job:
                path = jobs_root / request.bare_from_job / RECORDS_FILE
                if not path.is_file():
                    raise DesignError(f"bare_from_job: no records for job {request.bare_from_job}")
                bare = [r for r in read_records(path) if r.arm == "bare"]
            check_runner_identity(
                runner.identity, checkpoint_id=request.checkpoint_id, bare=bare or []
            )
            source = FRESH_BARE if bare is None else f"job:{request.bare_from_job}"
            baseline = bare_baseline(gate.plan, runner.identity, bare, source=source)
            run = open_gate_run(
                client, gate, round=request.round, identity=runner.identity, baseline=baseline
            )
            try:
                context.opened_gate_run(run.id)
                outcome = run_gate(
                    gate.plan,
                    runner,
                    bare_records=bare,
                    on_record=RecordLog(context.folder / RECORDS_FILE),
                    progress=context.progress,
                )
                recorded = record_gate(
                    client,
                    gate,
                    run,
                    outcome,
                    round=request.round,
                    empty_bank=request.empty_bank or empty_bank,
                )
                if request.move_alias:
                    adopt_bank(client, gate, recorded, round=request.round)
                else:
                    leave_alias(recorded)
            except Exception as error:
                close_failed_run(client, run.id, error)
                raise
            summary = {**outcome.summary(), "registry": recorded.as_dict()}
            (context.folder / "gate.json").write_text(json.dumps(summary, indent=1))
            return summary
        finally:
            client.close()

    return work


def close_failed_run(client: RegistryClient, run_id: int, error: BaseException) -> None:
    """Close a gate run whose rollouts or recording failed, so no run stays `open`.

    A run the registry already settled (its decision was stored before a later step failed)
    refuses the close; that refusal is logged, and the original error is what the job reports.
    """
    try:
        note = f"{type(error).__name__}: {error}"[:4000]
        client.close_gate_run(run_id, GateStatus.failed, note=note)
    except RegistryError as refusal:
        logger.warning("gate run %s not closed as failed: %s", run_id, refusal)


def registry_error_status(error: RegistryError) -> int:
    """The status the evaluator answers with when planning hit a registry error (503s come
    with Retry-After: REGISTRY_RETRY_AFTER_S)."""
    if error.status_code in (404, 409, 422):
        return 422  # the request named something the registry does not have or refuses
    if error.status_code in (401, 403):
        return 502  # our own token is wrong: a deployment problem, not the caller's
    return 503


REGISTRY_RETRY_AFTER_S = 5  # the readiness probe's own pace
