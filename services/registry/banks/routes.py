"""HTTP routes for banks: drafts, freeze, retire, documents (ETag), diff, render, operator edits."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from services.registry.banks import service
from services.registry.banks.cache import CachedBank, FrozenBankCache
from services.registry.concurrency import etag_matches
from services.registry.deps import EvaluatorWrite, OperatorWrite, Pagination, Reader, SessionDep
from services.registry.paths import Decimal, IdPath, OptionalIdQuery, RoundQuery
from services.registry.threads import run_blocking, run_read
from shared.contracts.registry_api.schemas import (
    MAX_ID,
    BankCreate,
    BankDiff,
    BankPublic,
    BankStatus,
    BankSummary,
    BankUpdate,
    ChunkRestore,
    ChunkRetire,
    Page,
    RenderedBank,
)

router = APIRouter(tags=["banks"])

IMMUTABLE = "public, max-age=31536000, immutable"
DOCUMENT_RESPONSES: dict[int | str, dict] = {
    304: {"description": "If-None-Match matched the frozen bank's ETag"},
}


def document_response(
    request: Request, cached: CachedBank, immutable: bool, *, cache_control: str | None = None
) -> Response:
    """200 with the bank bytes, or 304 when If-None-Match names its strong ETag."""
    if not immutable:
        return Response(
            cached.body, media_type="application/json", headers={"Cache-Control": "no-store"}
        )
    headers = {"ETag": cached.etag, "Cache-Control": cache_control or IMMUTABLE}
    if etag_matches(request.headers.get("if-none-match"), cached.etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(cached.body, media_type="application/json", headers=headers)


async def load_document(request: Request, bank_id: int) -> tuple[CachedBank, bool]:
    """A frozen bank from the cache, or from the database (cached when frozen)."""
    # The cache is read off app state rather than injected: on this hot path every dependency
    # FastAPI resolves is a measurable share of the request.
    cache: FrozenBankCache = request.app.state.bank_cache
    cached = cache.get(bank_id)
    if cached is not None:
        return cached, True
    loaded, immutable = await run_blocking(
        request,
        service.load_document_outside_request,
        session_factory=request.app.state.session_factory,
        bank_id=bank_id,
    )
    if immutable:
        cache.put(bank_id, loaded)
    return loaded, immutable


def _created(bank: BankPublic) -> dict[str, str]:
    return {"Location": f"/v1/banks/{bank.id}"}


@router.post("/banks", status_code=status.HTTP_201_CREATED, response_model=BankPublic)
async def create_bank(data: BankCreate, write: EvaluatorWrite) -> Response:
    """Create a draft bank (explicit entries, or a copy of `from_bank_id`)."""
    return await write(
        lambda session: service.create_bank(session=session, principal=write.principal, data=data),
        status_code=status.HTTP_201_CREATED,
        headers=_created,
    )


@router.get("/banks")
async def list_banks(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    status: BankStatus | None = None,
    round: RoundQuery = None,
    parent_bank_id: OptionalIdQuery = None,
) -> Page[BankSummary]:
    """List bank summaries (status, hash, size), filtered."""
    return await run_read(
        service.list_banks,
        session=session,
        status=status,
        round=round,
        parent_bank_id=parent_bank_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/banks/{bank_id}", response_model=BankPublic, responses=DOCUMENT_RESPONSES)
async def get_bank(bank_id: IdPath, request: Request, _: Reader) -> Response:
    """The bank document; frozen banks carry a strong ETag and immutable caching."""
    cached, immutable = await load_document(request, bank_id)
    return document_response(request, cached, immutable)


@router.patch("/banks/{bank_id}", response_model=BankPublic)
async def update_bank(bank_id: IdPath, data: BankUpdate, write: EvaluatorWrite) -> Response:
    """Change a draft's q / round / parent / decision / entries / note (409 once frozen)."""
    return await write(
        lambda session: service.update_bank(
            session=session, principal=write.principal, bank_id=bank_id, data=data
        )
    )


@router.get("/banks/{bank_id}/summary")
async def get_summary(bank_id: IdPath, session: SessionDep, _: Reader) -> BankSummary:
    """The bank's lifecycle status and size."""
    return await run_read(service.get_summary, session=session, bank_id=bank_id)


@router.post("/banks/{bank_id}/freeze", response_model=BankSummary)
async def freeze_bank(bank_id: IdPath, write: EvaluatorWrite) -> Response:
    """Draft -> frozen (content-hashed, immutable from now on)."""
    return await write(
        lambda session: service.freeze_bank(
            session=session, principal=write.principal, bank_id=bank_id
        )
    )


@router.post("/banks/{bank_id}/retire", response_model=BankSummary)
async def retire_bank(bank_id: IdPath, write: EvaluatorWrite) -> Response:
    """Frozen -> retired (409 while an alias points at it)."""
    return await write(
        lambda session: service.retire_bank(
            session=session, principal=write.principal, bank_id=bank_id
        )
    )


@router.get("/banks/{bank_id}/diff")
async def diff_banks(
    bank_id: IdPath,
    session: SessionDep,
    _: Reader,
    against: Annotated[int, Decimal, Query(ge=1, le=MAX_ID, description="the older bank")],
) -> BankDiff:
    """Added / retired / rewritten chunks and rho changes from `against` to this bank."""
    return await run_read(service.diff, session=session, bank_id=bank_id, against=against)


@router.get("/banks/{bank_id}/render")
async def render_bank(
    bank_id: IdPath,
    session: SessionDep,
    _: Reader,
    inclusion: Annotated[
        str | None,
        Query(max_length=400, description="comma-separated 0/1 per entry; omitted = all"),
    ] = None,
) -> RenderedBank:
    """The exact skill block a prompt contains for this inclusion vector."""
    return await run_read(service.render, session=session, bank_id=bank_id, inclusion=inclusion)


@router.post(
    "/banks/{bank_id}/retire-chunk", status_code=status.HTTP_201_CREATED, response_model=BankPublic
)
async def retire_chunk(bank_id: IdPath, data: ChunkRetire, write: OperatorWrite) -> Response:
    """Operator: a new draft (child of this bank) without the chunk."""
    return await write(
        lambda session: service.retire_chunk(
            session=session, principal=write.principal, bank_id=bank_id, data=data
        ),
        status_code=status.HTTP_201_CREATED,
        headers=_created,
    )


@router.post(
    "/banks/{bank_id}/restore-chunk", status_code=status.HTTP_201_CREATED, response_model=BankPublic
)
async def restore_chunk(bank_id: IdPath, data: ChunkRestore, write: OperatorWrite) -> Response:
    """Operator: a new draft (child of this bank) with the chunk restored."""
    return await write(
        lambda session: service.restore_chunk(
            session=session, principal=write.principal, bank_id=bank_id, data=data
        ),
        status_code=status.HTTP_201_CREATED,
        headers=_created,
    )
