"""Gate, Gate A and evaluation jobs: POST -> 202 + job id (planned now, so a bad request is a 4xx
naming the field and not a failed job), GET polls, lists by kind."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from services.evaluator.deps import (
    Context,
    EvaluatorContext,
    IdempotencyKey,
    Jobs,
    may_read,
    may_submit,
    registry_failed,
    unprocessable,
)
from services.evaluator.design import DesignError, RankDeficientError
from services.evaluator.gate_job import RECORDS_FILE, gate_job, plan_gate_a_job, plan_gate_job
from shared.contracts.evaluator_api.schemas import (
    DESIGN_NOT_IDENTIFIED,
    EvalJobCreate,
    GateAJobCreate,
    GateJobCreate,
)
from shared.contracts.registry_api.client import RegistryError
from shared.kit.auth import Principal
from shared.kit.service_jobs import JobPublic, JobStore, Work, submit_as

router = APIRouter()
ACCEPTED = {"status_code": status.HTTP_202_ACCEPTED, "response_model": JobPublic,
            "responses": {409: {}, 429: {}, 503: {}}}  # fmt: skip
StatusFilter = Annotated[str | None, Query(alias="status")]


def enqueue(kind, body, work, store: JobStore, caller: Principal, key, response) -> JobPublic:
    """Submit a job as `caller` (its role's lane, its own idempotency keys)."""
    job = submit_as(store, kind, body, work, caller, key)
    response.headers["Location"] = f"/v1/{kind}-jobs/{job.id}"
    return JobPublic(**job.public())


def check_bare_from_job(kind: str, body, store: JobStore, context: EvaluatorContext) -> None:
    """Only a job of the same kind: one the caller's role may read, whose records exist. Any
    other id reads as unknown, so the answer does not tell which ids exist."""
    earlier = store.get(body.bare_from_job)
    records = context.settings.jobs_dir / body.bare_from_job / RECORDS_FILE
    if earlier is None or earlier.kind != kind or not records.is_file():
        raise unprocessable(
            ["bare_from_job"], f"no {kind} job {body.bare_from_job!r} with rollouts"
        )


def submit_gate(kind: str, body, planner, store: JobStore, context: EvaluatorContext) -> Work:
    """Plan a gate now (registry reads, rank check); the job that runs its rollouts."""
    if body.bare_from_job is not None:
        check_bare_from_job(kind, body, store, context)
    settings = context.settings
    task_ids = context.select_tasks(settings.split, body.task_ids, body.n_tasks)
    client = context.planning_clients()
    try:
        planned = planner(body, client, settings, task_ids)
    except RegistryError as error:
        raise registry_failed(error) from None
    except DesignError as error:
        problem = DESIGN_NOT_IDENTIFIED if isinstance(error, RankDeficientError) else "value_error"
        raise unprocessable([error.field or "task_ids"], str(error), problem) from None
    finally:
        client.close()
    return gate_job(
        planned,
        client_factory=context.clients,
        runner_factory=context.runners,
        jobs_root=settings.jobs_dir,
        empty_bank=settings.empty_bank,
    )


@router.post("/v1/gate-jobs", **ACCEPTED)
def create_gate_job(
    body: GateJobCreate,
    store: Jobs,
    context: Context,
    response: Response,
    caller: Annotated[Principal, may_submit("gate")],
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """An interval gate: base bank + the round's candidates; S_{t+1}, `current` moves."""
    work = submit_gate("gate", body, plan_gate_job, store, context)
    return enqueue("gate", body, work, store, caller, idempotency_key, response)


@router.post("/v1/gate-a-jobs", **ACCEPTED)
def create_gate_a_job(
    body: GateAJobCreate,
    store: Jobs,
    context: Context,
    response: Response,
    caller: Annotated[Principal, may_submit("gate-a")],
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """Gate A (cold start): draft chunk versions; S_0, `current` moves (or is created)."""
    work = submit_gate("gate-a", body, plan_gate_a_job, store, context)
    return enqueue("gate-a", body, work, store, caller, idempotency_key, response)


@router.post("/v1/eval-jobs", **ACCEPTED)
def create_eval_job(
    body: EvalJobCreate,
    store: Jobs,
    context: Context,
    response: Response,
    caller: Annotated[Principal, may_submit("eval")],
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """Test-set evaluation of several conditions, one rollout per task each, as a job."""
    from services.evaluator.eval_job import eval_job, plan_eval_job

    task_ids = context.select_tasks(body.split, body.task_ids, body.n_tasks)
    client = context.planning_clients()
    try:
        planned = plan_eval_job(body, client, context.settings, task_ids)
    except RegistryError as error:
        raise registry_failed(error) from None
    except ValueError as error:
        raise unprocessable(["conditions"], str(error)) from None
    finally:
        client.close()
    work = eval_job(planned, runner_factory=context.runners, client_factory=context.clients)
    return enqueue("eval", body, work, store, caller, idempotency_key, response)


def get_job(store: JobStore, kind: str, job_id: str) -> JobPublic:
    job = store.get(job_id)
    if job is None or job.kind != kind:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no {kind} job {job_id!r}")
    return JobPublic(**job.public())


def list_jobs(store: JobStore, kind: str, status_filter: str | None) -> list[JobPublic]:
    return [
        JobPublic(**job.public())
        for job in store.list(kind)
        if status_filter is None or job.status == status_filter
    ]


@router.get("/v1/gate-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("gate")])
def read_gate_job(job_id: str, store: Jobs) -> JobPublic:
    return get_job(store, "gate", job_id)


@router.get("/v1/gate-a-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("gate-a")])
def read_gate_a_job(job_id: str, store: Jobs) -> JobPublic:
    return get_job(store, "gate-a", job_id)


@router.get("/v1/eval-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("eval")])
def read_eval_job(job_id: str, store: Jobs) -> JobPublic:
    return get_job(store, "eval", job_id)


@router.get("/v1/gate-jobs", response_model=list[JobPublic], dependencies=[may_read("gate")])
def list_gate_jobs(store: Jobs, status_filter: StatusFilter = None) -> list[JobPublic]:
    return list_jobs(store, "gate", status_filter)


@router.get("/v1/gate-a-jobs", response_model=list[JobPublic], dependencies=[may_read("gate-a")])
def list_gate_a_jobs(store: Jobs, status_filter: StatusFilter = None) -> list[JobPublic]:
    return list_jobs(store, "gate-a", status_filter)
