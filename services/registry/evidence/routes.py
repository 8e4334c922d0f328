"""HTTP routes for checkpoints and all-wrong group evidence."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from services.registry.deps import Pagination, Reader, SessionDep, TrainerWrite
from services.registry.evidence import service
from services.registry.paths import IdPath, NamePath, RoundQuery
from services.registry.threads import run_read
from shared.contracts.registry_api.schemas import (
    CheckpointCreate,
    CheckpointPublic,
    EvidenceCreate,
    EvidencePublic,
    EvidenceUpdate,
    Page,
    RetryOutcome,
)

router = APIRouter(tags=["evidence"])


@router.post("/checkpoints", status_code=status.HTTP_201_CREATED, response_model=CheckpointPublic)
async def create_checkpoint(data: CheckpointCreate, write: TrainerWrite) -> Response:
    """Register a checkpoint (id, URI, step, round)."""
    return await write(
        lambda session: service.create_checkpoint(
            session=session, principal=write.principal, data=data
        ),
        status_code=status.HTTP_201_CREATED,
        headers=lambda checkpoint: {"Location": f"/v1/checkpoints/{checkpoint.id}"},
    )


@router.get("/checkpoints")
async def list_checkpoints(
    session: SessionDep, _: Reader, paging: Pagination, round: RoundQuery = None
) -> Page[CheckpointPublic]:
    """List checkpoints by step."""
    return await run_read(
        service.list_checkpoints,
        session=session,
        round=round,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/checkpoints/{checkpoint_id}")
async def get_checkpoint(
    checkpoint_id: NamePath, session: SessionDep, _: Reader
) -> CheckpointPublic:
    """One checkpoint."""
    return await run_read(service.get_checkpoint, session=session, checkpoint_id=checkpoint_id)


@router.post("/evidence", status_code=status.HTTP_201_CREATED, response_model=EvidencePublic)
async def create_evidence(data: EvidenceCreate, write: TrainerWrite) -> Response:
    """Record an all-wrong group (task, treatment, bank, checkpoint, retry outcome)."""
    return await write(
        lambda session: service.create_group(session=session, principal=write.principal, data=data),
        status_code=status.HTTP_201_CREATED,
        headers=lambda group: {"Location": f"/v1/evidence/{group.id}"},
    )


@router.get("/evidence")
async def list_evidence(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    round: RoundQuery = None,
    checkpoint_id: Annotated[str | None, Query(max_length=64)] = None,
    retry_outcome: RetryOutcome | None = None,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[EvidencePublic]:
    """List all-wrong groups, filtered (e.g. retry_outcome=failure for the analyst)."""
    return await run_read(
        service.list_groups,
        session=session,
        round=round,
        checkpoint_id=checkpoint_id,
        retry_outcome=retry_outcome,
        task_id=task_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/evidence/{group_id}")
async def get_evidence(group_id: IdPath, session: SessionDep, _: Reader) -> EvidencePublic:
    """One all-wrong group."""
    return await run_read(service.get_group, session=session, group_id=group_id)


@router.patch("/evidence/{group_id}", response_model=EvidencePublic)
async def settle_evidence(group_id: IdPath, data: EvidenceUpdate, write: TrainerWrite) -> Response:
    """Record the full-skill retry's outcome of a pending group."""
    return await write(
        lambda session: service.settle_retry(
            session=session, principal=write.principal, group_id=group_id, data=data
        )
    )
