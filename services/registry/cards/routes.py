"""HTTP routes for failure cards and candidates."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from services.registry.cards import service
from services.registry.deps import AnalystWrite, Pagination, PrivilegedReader, Reader, SessionDep
from services.registry.paths import IdPath, RoundQuery
from services.registry.threads import run_read
from shared.contracts.registry_api.schemas import (
    CandidateCreate,
    CandidateOperation,
    CandidatePublic,
    CandidateStatus,
    CardAuditPublic,
    CardCreate,
    CardOutcome,
    CardPublic,
    Page,
)

router = APIRouter(tags=["cards"])


@router.post("/cards", status_code=status.HTTP_201_CREATED, response_model=CardPublic)
async def create_card(data: CardCreate, write: AnalystWrite) -> Response:
    """Store a failure card (outcome, eligibility, firewall findings, both halves)."""
    return await write(
        lambda session: service.create_card(session=session, principal=write.principal, data=data),
        status_code=status.HTTP_201_CREATED,
        headers=lambda card: {"Location": f"/v1/cards/{card.id}"},
        insert_only=True,
    )


@router.get("/cards")
async def list_cards(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    round: RoundQuery = None,
    outcome: CardOutcome | None = None,
    eligible: bool | None = None,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[CardPublic]:
    """List cards (deployable half only), filtered."""
    return await run_read(
        service.list_cards,
        session=session,
        round=round,
        outcome=outcome,
        eligible=eligible,
        task_id=task_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/cards/{card_id}")
async def get_card(card_id: IdPath, session: SessionDep, _: Reader) -> CardPublic:
    """One card without its privileged audit."""
    return await run_read(service.get_card, session=session, card_id=card_id)


@router.get("/cards/{card_id}/audit")
async def get_card_audit(
    card_id: IdPath, session: SessionDep, _: PrivilegedReader
) -> CardAuditPublic:
    """The card's gold-aware audit: analysts and operators only."""
    return await run_read(service.get_card_audit, session=session, card_id=card_id)


@router.post("/candidates", status_code=status.HTTP_201_CREATED, response_model=CandidatePublic)
async def create_candidate(data: CandidateCreate, write: AnalystWrite) -> Response:
    """Store an ADD / REWRITE candidate as a new chunk version, citing its source cards."""
    return await write(
        lambda session: service.create_candidate(
            session=session, principal=write.principal, data=data
        ),
        status_code=status.HTTP_201_CREATED,
        headers=lambda candidate: {"Location": f"/v1/candidates/{candidate.id}"},
    )


@router.get("/candidates")
async def list_candidates(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    round: RoundQuery = None,
    operation: CandidateOperation | None = None,
    status: CandidateStatus | None = None,
) -> Page[CandidatePublic]:
    """List candidates, filtered."""
    return await run_read(
        service.list_candidates,
        session=session,
        round=round,
        operation=operation,
        status=status,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/candidates/{candidate_id}")
async def get_candidate(candidate_id: IdPath, session: SessionDep, _: Reader) -> CandidatePublic:
    """One candidate."""
    return await run_read(service.get_candidate, session=session, candidate_id=candidate_id)
