"""Round compilations (the trainer's) and the cold start (an operator's) as jobs: POST -> 202 +
job id, after checking now what the job needs (a 4xx naming the field, 503 when the registry is
away), GET polls."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Response, status

from services.analyst.deps import (
    OPERATOR,
    READERS,
    TRAINER,
    AnalystContext,
    Context,
    Groups,
    IdempotencyKey,
    Jobs,
    registry_away,
    unprocessable,
)
from shared.contracts.analyst_api.schemas import ColdStartCreate, CompileRoundCreate, JobPublic
from shared.contracts.registry_api.client import NotFound, RegistryError
from shared.kit.auth import Principal
from shared.kit.service_jobs import JobStore, submit_as

router = APIRouter()


def check_references(body, context: AnalystContext, *, bank_id: int | None = None) -> None:
    """What the job needs from the registry exists (the checkpoint, the round's bank), so a bad
    reference is a 422 now and a registry that is away a 503, not a job that fails after its
    rollouts."""
    try:
        client = context.planning_clients()
    except LookupError as missing:  # no registry token: a deployment problem, not the call's
        raise HTTPException(
            502, detail=f"the analyst cannot reach the registry: {missing}"
        ) from None
    try:
        try:
            client.get_checkpoint(body.policy.checkpoint_id)
        except NotFound:
            raise unprocessable(
                ["policy", "checkpoint_id"], f"no checkpoint {body.policy.checkpoint_id!r}"
            ) from None
        if bank_id is not None:
            check_bank(client, bank_id)
    except RegistryError as error:
        raise registry_away(error) from None
    finally:
        client.close()


def check_bank(client, bank_id: int) -> None:
    try:
        bank = client.get_bank(bank_id)
    except NotFound:
        raise unprocessable(["bank_id"], f"no bank {bank_id}") from None
    if bank.content_hash is None:
        raise unprocessable(["bank_id"], f"bank {bank_id} is not frozen")


def check_policy(body) -> None:
    """A policy that can load: weights named by a local folder must be there."""
    uri = body.policy.weights_uri
    from_disk = body.policy.backend in ("transformers", "vllm", "simulated")
    local = from_disk and uri is not None and uri.startswith("file://")
    if local and not Path(uri.removeprefix("file://")).exists():
        raise unprocessable(["policy", "weights_uri"], f"no weights at {uri}")


def validation_tasks(preset: str, context: AnalystContext) -> int | None:
    """The val split's size of the world Gate A runs on (None: a world folder decides)."""
    from shared.runtime.shopsim.presets import PRESETS

    return None if context.settings.env_path else PRESETS[preset].counts["val"]


def submit(kind, body, work, store: JobStore, response: Response, caller, key) -> JobPublic:
    """Submit a job as `caller` (its role's lane, its own idempotency keys)."""
    job = submit_as(store, kind, body, work, caller, key)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobPublic(**job.public())


@router.post("/v1/compile-jobs", status_code=202, response_model=JobPublic)
def create_compile_job(
    body: CompileRoundCreate,
    store: Jobs,
    groups: Groups,
    context: Context,
    response: Response,
    caller: Annotated[Principal, TRAINER],
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """Retries, analysis and compilation of a round, on its frozen checkpoint and bank."""
    from services.analyst.slow_loop import compile_round_job

    check_policy(body)
    check_references(body, context, bank_id=body.bank_id)

    def work(job) -> dict:
        client = context.clients()
        try:
            return compile_round_job(
                body, settings=context.settings, store=groups, client=client,
                analyzer=context.analyzer_for(body.analyst_backend),
                folder=job.folder, progress=job.progress, similar=context.similar,
                compiler=context.compiler_for(body.compiler_backend),
            )  # fmt: skip
        finally:
            client.close()

    return submit("compile", body, work, store, response, caller, idempotency_key)


@router.post("/v1/cold-start-jobs", status_code=202, response_model=JobPublic)
def create_cold_start_job(
    body: ColdStartCreate,
    store: Jobs,
    context: Context,
    response: Response,
    caller: Annotated[Principal, OPERATOR],
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """Trace2Skill cold start: bare runs -> cards -> drafts -> Gate A -> S_0."""
    from services.analyst.cold_start import cold_start_job

    check_policy(body)
    if body.gate_a_tasks is not None:
        available = validation_tasks(body.env_preset, context)
        if available is not None and body.gate_a_tasks > available:
            raise unprocessable(["gate_a_tasks"], f"the val split has only {available} tasks")
    check_references(body, context)

    def work(job) -> dict:
        client = context.clients()
        try:
            return cold_start_job(
                body, settings=context.settings, client=client,
                analyzer=context.analyzer_for(body.analyst_backend),
                folder=job.folder, progress=job.progress,
            )  # fmt: skip
        finally:
            client.close()

    return submit("cold-start", body, work, store, response, caller, idempotency_key)


@router.get("/v1/jobs/{job_id}", response_model=JobPublic, dependencies=[READERS])
def read_job(job_id: str, store: Jobs) -> JobPublic:
    job = store.get(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id!r}")
    return JobPublic(**job.public())
