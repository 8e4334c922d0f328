"""HTTP routes for gate runs, their observations and decisions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from services.registry.deps import EvaluatorWrite, Pagination, Reader, SessionDep
from services.registry.gates import service
from services.registry.paths import IdPath, RoundQuery
from services.registry.threads import run_read
from shared.contracts.registry_api.schemas import (
    DecisionCreate,
    DecisionPublic,
    GateKind,
    GateRunCreate,
    GateRunPublic,
    GateRunUpdate,
    GateStatus,
    ObservationBatch,
    ObservationBatchResult,
    ObservationPublic,
    Page,
)

router = APIRouter(tags=["gates"])


@router.post("/gates", status_code=status.HTTP_201_CREATED, response_model=GateRunPublic)
async def create_gate_run(data: GateRunCreate, write: EvaluatorWrite) -> Response:
    """Open a gate run: kind, checkpoint, base bank (online) or cold-start drafts (Gate A),
    candidate pool, split, sample, mask seed, K, solver, task count, rollout identity and bare
    baseline."""
    return await write(
        lambda session: service.create_run(session=session, principal=write.principal, data=data),
        status_code=status.HTTP_201_CREATED,
        headers=lambda run: {"Location": f"/v1/gates/{run.id}"},
    )


@router.get("/gates")
async def list_gate_runs(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    kind: GateKind | None = None,
    round: RoundQuery = None,
    status: GateStatus | None = None,
    checkpoint_id: Annotated[str | None, Query(max_length=64)] = None,
) -> Page[GateRunPublic]:
    """List gate runs, filtered by kind (online / gate_a), round, status or checkpoint."""
    return await run_read(
        service.list_runs,
        session=session,
        kind=kind,
        round=round,
        status=status,
        checkpoint_id=checkpoint_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/gates/{run_id}")
async def get_gate_run(run_id: IdPath, session: SessionDep, _: Reader) -> GateRunPublic:
    """One gate run."""
    return await run_read(service.get_run, session=session, run_id=run_id)


@router.patch("/gates/{run_id}", response_model=GateRunPublic)
async def close_gate_run(run_id: IdPath, data: GateRunUpdate, write: EvaluatorWrite) -> Response:
    """Close an open gate without a decision (incomplete or failed)."""
    return await write(
        lambda session: service.update_run(
            session=session, principal=write.principal, run_id=run_id, data=data
        )
    )


@router.post(
    "/gates/{run_id}/observations",
    status_code=status.HTTP_201_CREATED,
    response_model=ObservationBatchResult,
)
async def add_observations(
    run_id: IdPath, data: ObservationBatch, write: EvaluatorWrite
) -> Response:
    """Append raw per-task observations (bare and masked components, inclusion vector)."""
    return await write(
        lambda session: service.add_observations(
            session=session, principal=write.principal, run_id=run_id, data=data
        ),
        status_code=status.HTTP_201_CREATED,
    )


@router.get("/gates/{run_id}/observations")
async def list_observations(
    run_id: IdPath,
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[ObservationPublic]:
    """The raw observations of a gate, for re-fitting and audit."""
    return await run_read(
        service.list_observations,
        session=session,
        run_id=run_id,
        task_id=task_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.post(
    "/gates/{run_id}/decision", status_code=status.HTTP_201_CREATED, response_model=DecisionPublic
)
async def post_decision(run_id: IdPath, data: DecisionCreate, write: EvaluatorWrite) -> Response:
    """Record the decision (a row per pool version): final completes the gate, provisional
    closes it as incomplete."""
    return await write(
        lambda session: service.post_decision(
            session=session, principal=write.principal, run_id=run_id, data=data
        ),
        status_code=status.HTTP_201_CREATED,
        headers=lambda decision: {"Location": f"/v1/decisions/{decision.id}"},
    )


@router.get("/gates/{run_id}/decision")
async def get_run_decision(run_id: IdPath, session: SessionDep, _: Reader) -> DecisionPublic:
    """The decision of a gate run."""
    return await run_read(service.get_run_decision, session=session, run_id=run_id)


@router.get("/decisions/{decision_id}")
async def get_decision(decision_id: IdPath, session: SessionDep, _: Reader) -> DecisionPublic:
    """One gate decision by id."""
    return await run_read(service.get_decision, session=session, decision_id=decision_id)
