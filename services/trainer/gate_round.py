"""The interval's gate: the evaluator's paired randomized experiment on the frozen checkpoint
with S_t and the round's candidates. S_{t+1} is adopted only when the gate completes; otherwise
S_t stays (the method's rule). A restart finds the gate it already asked for. Each way through
records the round and returns the bank of the next round; the orchestrator hands over."""

from __future__ import annotations

import httpx

from services.trainer.ablations import admitted_entries
from services.trainer.bank_resolution import pin_bank
from services.trainer.heartbeat import heartbeat
from services.trainer.run_context import RoundRecord, RunContext, RunError, RunState, unavailable
from services.trainer.validation_tasks import gate_task_ids, val_task_ids
from shared.contracts.evaluator_api.client import (
    EvaluatorError,
    EvaluatorUnavailable,
    JobFailed,
)
from shared.contracts.evaluator_api.schemas import (
    DESIGN_NOT_IDENTIFIED,
    AdmitRule,
    GateJobCreate,
    JobPublic,
)
from shared.contracts.registry_api.client import RegistryClient

MASK_SEED_ATTEMPTS = 5  # the configured seed, then the next four (see submit_gate)


def gate_round(context: RunContext, state: RunState) -> int:
    config, round_index = context.config, state.round
    evaluator = context.clients.evaluator
    record = context.record.round(round_index)
    url = context.record.service_url("evaluator")
    registry = context.clients.registry
    if not record.candidate_ids and not pin_bank(registry, state.bank_id, None).entries:
        return keep_bank_without_gate(context, state)
    if config.gate.admit == "all":
        if record.candidate_ids:
            return admit_without_gate(context, state, record)
        return keep_bank_without_gate(context, state, reason="no candidate to admit")
    try:
        job_id = record.gate_job_id
        job = evaluator.find_job("gate", job_id) if job_id else None
        if job is None or (job.status == "failed" and job.error == "interrupted"):
            job = evaluator.find_gate(round_index=round_index, checkpoint_id=state.checkpoint_id)
        if job is None:
            job = submit_gate(context, state, record)
        if job is None:
            return keep_bank_without_gate(context, state, reason="no identifiable design")
        record.gate_job_id = job.id
        context.record.save()
        context.console.print(f"round {round_index}: gate job {job.id} on {url}")
        with heartbeat(context.out):  # a 400-task gate outlasts the liveness window
            job = evaluator.wait_for_job(
                "gate", job.id, poll=config.gate.poll_s, timeout=config.gate.timeout_s
            )
    except JobFailed as failed:  # a gate that failed has not completed: S_t stays
        job = failed.job
    except TimeoutError as error:
        raise RunError(f"{error}; rerun the same command to wait on it again") from None
    except EvaluatorUnavailable as error:  # no answer, or only 5xx, after every retry
        raise unavailable("evaluator", url, error, "intraskill gate serve") from None
    except EvaluatorError as error:
        raise RunError(f"the evaluator refused the gate: {error}") from None
    except httpx.HTTPError as error:
        raise unavailable("evaluator", url, error, "intraskill gate serve") from None
    return _adopt_or_keep(context, state, record, job)


def _adopt_or_keep(
    context: RunContext, state: RunState, record: RoundRecord, job: JobPublic
) -> int:
    result = job.result or {}
    registry = result.get("registry") or {}
    complete = job.status == "succeeded" and result.get("status") == "complete"
    next_bank = registry.get("bank_id") if complete else None
    record.update(
        gate_status=result.get("status") or job.status,
        gate_error=job.error,
        gate_run_id=registry.get("gate_run_id"),
        gate_decision_id=registry.get("decision_id"),
        next_bank_id=next_bank or state.bank_id,
        adopted=bool(next_bank),
    )
    context.record.save()
    context.console.print(
        f"round {state.round}: gate {record.gate_status}, run {record.gate_run_id}; "
        + (f"adopted bank {next_bank}" if next_bank else f"keeping bank {state.bank_id}")
    )
    return next_bank or state.bank_id


def submit_gate(context: RunContext, state: RunState, record: RoundRecord) -> JobPublic | None:
    """Submit the round's gate; None when no mask seed tried gives an identifiable design.

    A small gate (few tasks, many columns) can draw masks under which some coefficient is
    not identified or a task has leverage 1 (HC3 undefined); the evaluator refuses such a
    design before any rollout. The masks are then drawn again from the next seed, up to
    MASK_SEED_ATTEMPTS seeds; the seed used is in the round's record and the gate's."""
    gate = context.config.gate
    body = GateJobCreate(
        round=state.round,
        checkpoint_id=state.checkpoint_id,
        alias=gate.alias,
        base_bank_id=state.bank_id,
        candidate_ids=record.candidate_ids,
        n_tasks=gate.val_tasks,
        budget=gate.budget,
        move_alias=True,
        admit=gate_admission(gate.admit),
    )
    if gate.val_policy == "rotate":  # this round's own subset of the pool (validation_tasks.py)
        task_ids = gate_task_ids(context.config, val_task_ids(context.config), state.round)
        body = body.model_copy(update={"task_ids": task_ids, "n_tasks": None})
        record.val_task_ids = task_ids
    for mask_seed in range(gate.mask_seed, gate.mask_seed + MASK_SEED_ATTEMPTS):
        try:
            job = context.clients.evaluator.submit(
                "gate", body.model_copy(update={"mask_seed": mask_seed})
            )
        except EvaluatorError as error:
            if DESIGN_NOT_IDENTIFIED not in error.error_types:
                raise
            context.console.print(f"round {state.round}: mask seed {mask_seed}: {error}")
            continue
        record.mask_seed = mask_seed
        return job
    return None


def keep_bank_without_gate(
    context: RunContext,
    state: RunState,
    *,
    reason: str = "empty pool (no current chunk, no candidate)",
) -> int:
    """S_t stays for the next round: an empty S_t without candidates leaves nothing to
    randomize, and a gate that cannot run has not completed (the method keeps S_t)."""
    record = context.record.round(state.round)
    record.update(gate_status=f"skipped: {reason}", next_bank_id=state.bank_id, adopted=False)
    context.record.save()
    context.console.print(
        f"round {state.round}: {reason}; keeping bank {state.bank_id} without a gate"
    )
    return state.bank_id


def admit_without_gate(context: RunContext, state: RunState, record: RoundRecord) -> int:
    """The no-gate ablation: every candidate joins the bank untested (operator rights:
    creating a bank and moving an alias is the gate's or an operator's act)."""
    round_index = state.round
    token = context.clients.operator_token
    if not token:
        raise RunError("gate.admit = 'all' needs TRAINER_OPERATOR_TOKEN (operator role)")
    operator = RegistryClient(context.record.service_url("registry"), token)
    try:
        bank = pin_bank(operator, state.bank_id, None)
        candidates = [operator.get_candidate(i) for i in record.candidate_ids]
        key = f"{context.run_id}:admit-all:{round_index}"
        new = operator.create_frozen_bank(
            admitted_entries(bank, candidates, context.config),
            q=bank.q,
            round=round_index + 1,
            parent_bank_id=bank.id,
            note=f"no-gate ablation: {len(candidates)} candidates admitted untested",
            idempotency_key=key,
        )
        reason = f"no-gate ablation, round {round_index}"
        operator.point_alias(context.config.gate.alias, new.id, reason=reason)
    finally:
        operator.close()
    record.update(
        gate_status="skipped: admitted without a gate (ablation)",
        next_bank_id=new.id,
        adopted=True,
        admitted_untested=[c.id for c in candidates],
    )
    context.record.save()
    return new.id


def gate_admission(admit: str) -> AdmitRule:
    """The evaluator's admission rule for `gate.admit` (`all` never reaches the evaluator)."""
    return "lower_bound" if admit == "lower_bound" else "coefficient"
