"""HTTP routes for aliases: create, resolve, move with If-Match, rollback, history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from services.registry.aliases import service
from services.registry.banks.routes import DOCUMENT_RESPONSES, document_response, load_document
from services.registry.concurrency import IdempotentRoute
from services.registry.deps import (
    Evaluator,
    Operator,
    Pagination,
    Reader,
    SessionDep,
    SettingsDep,
)
from services.registry.paths import NamePath
from shared.registry_api.schemas import (
    MAX_ID,
    AliasCreate,
    AliasEventPublic,
    AliasMove,
    AliasPublic,
    AliasRollback,
    BankPublic,
    Page,
)

router = APIRouter(tags=["aliases"], route_class=IdempotentRoute)

IfMatch = Annotated[
    str | None, Header(alias="If-Match", max_length=1000, description="the alias's current ETag")
]


def _with_etag(response: Response, alias: AliasPublic) -> AliasPublic:
    response.headers["ETag"] = alias.etag
    response.headers["Cache-Control"] = "no-cache"
    return alias


@router.post("/aliases", status_code=status.HTTP_201_CREATED)
async def create_alias(
    data: AliasCreate,
    session: SessionDep,
    principal: Evaluator,
    settings: SettingsDep,
    response: Response,
) -> AliasPublic:
    """Create an alias pointing at a frozen bank (protected names: operators only)."""
    alias = await run_in_threadpool(
        service.create_alias,
        session=session,
        principal=principal,
        data=data,
        protected_names=settings.protected_aliases,
    )
    response.headers["Location"] = f"/v1/aliases/{alias.name}"
    return _with_etag(response, alias)


@router.get("/aliases")
async def list_aliases(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    bank_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Page[AliasPublic]:
    """List aliases, optionally those pointing at one bank."""
    return await run_in_threadpool(
        service.list_aliases,
        session=session,
        bank_id=bank_id,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/aliases/{name}")
async def get_alias(
    name: NamePath, session: SessionDep, _: Reader, response: Response
) -> AliasPublic:
    """Resolve an alias: its bank id and ETag (use the ETag as If-Match to move it)."""
    return _with_etag(
        response, await run_in_threadpool(service.get_alias, session=session, name=name)
    )


@router.get("/aliases/{name}/bank", response_model=BankPublic, responses=DOCUMENT_RESPONSES)
async def get_alias_bank(name: NamePath, request: Request, _: Reader) -> Response:
    """The document of the bank the alias points at now (revalidate with If-None-Match)."""
    alias = await run_in_threadpool(
        service.resolve_outside_request,
        session_factory=request.app.state.session_factory,
        name=name,
    )
    cached, immutable = await load_document(request, alias.bank_id)
    response = document_response(request, cached, immutable, cache_control="no-cache")
    response.headers["Content-Location"] = f"/v1/banks/{alias.bank_id}"
    return response


@router.put(
    "/aliases/{name}",
    responses={412: {"description": "stale If-Match"}, 428: {"description": "If-Match missing"}},
)
async def move_alias(
    name: NamePath,
    data: AliasMove,
    session: SessionDep,
    principal: Evaluator,
    settings: SettingsDep,
    response: Response,
    if_match: IfMatch = None,
) -> AliasPublic:
    """Move the alias to another frozen bank; compare-and-set on If-Match."""
    alias = await run_in_threadpool(
        service.move_alias,
        session=session,
        principal=principal,
        name=name,
        data=data,
        if_match=if_match,
        protected_names=settings.protected_aliases,
    )
    return _with_etag(response, alias)


@router.post("/aliases/{name}/rollback", responses={412: {"description": "stale If-Match"}})
async def rollback_alias(
    name: NamePath,
    data: AliasRollback,
    session: SessionDep,
    principal: Operator,
    response: Response,
    if_match: IfMatch = None,
) -> AliasPublic:
    """Operator: point the alias back at an earlier bank (default: the previous one)."""
    alias = await run_in_threadpool(
        service.rollback_alias,
        session=session,
        principal=principal,
        name=name,
        data=data,
        if_match=if_match,
    )
    return _with_etag(response, alias)


@router.get("/aliases/{name}/history")
async def alias_history(
    name: NamePath, session: SessionDep, _: Reader, paging: Pagination
) -> Page[AliasEventPublic]:
    """The alias's append-only history (who moved it where, when, why)."""
    return await run_in_threadpool(
        service.history, session=session, name=name, limit=paging.limit, offset=paging.offset
    )
