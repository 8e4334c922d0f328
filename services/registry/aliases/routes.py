"""HTTP routes for aliases: create, resolve, move with If-Match, rollback, history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request, Response, status

from services.registry.aliases import service
from services.registry.banks.routes import DOCUMENT_RESPONSES, document_response, load_document
from services.registry.deps import (
    EvaluatorWrite,
    OperatorWrite,
    Pagination,
    Reader,
    SessionDep,
    SettingsDep,
)
from services.registry.paths import NamePath, OptionalIdQuery
from services.registry.threads import run_blocking, run_read
from shared.contracts.registry_api.schemas import (
    AliasCreate,
    AliasEventPublic,
    AliasMove,
    AliasPublic,
    AliasRollback,
    BankPublic,
    Page,
)

router = APIRouter(tags=["aliases"])

IfMatch = Annotated[
    str | None, Header(alias="If-Match", max_length=1000, description="the alias's current ETag")
]


def _etag_headers(alias: AliasPublic) -> dict[str, str]:
    return {"ETag": alias.etag, "Cache-Control": "no-cache"}


def _with_etag(response: Response, alias: AliasPublic) -> AliasPublic:
    response.headers.update(_etag_headers(alias))
    return alias


@router.post("/aliases", status_code=status.HTTP_201_CREATED, response_model=AliasPublic)
async def create_alias(data: AliasCreate, write: EvaluatorWrite, settings: SettingsDep) -> Response:
    """Create an alias pointing at a frozen bank (protected names: operators only)."""
    return await write(
        lambda session: service.create_alias(
            session=session,
            principal=write.principal,
            data=data,
            protected_names=settings.protected_aliases,
        ),
        status_code=status.HTTP_201_CREATED,
        headers=lambda alias: {**_etag_headers(alias), "Location": f"/v1/aliases/{alias.name}"},
    )


@router.get("/aliases")
async def list_aliases(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    bank_id: OptionalIdQuery = None,
) -> Page[AliasPublic]:
    """List aliases, optionally those pointing at one bank."""
    return await run_read(
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
    return _with_etag(response, await run_read(service.get_alias, session=session, name=name))


@router.get("/aliases/{name}/bank", response_model=BankPublic, responses=DOCUMENT_RESPONSES)
async def get_alias_bank(name: NamePath, request: Request, _: Reader) -> Response:
    """The document of the bank the alias points at now (revalidate with If-None-Match)."""
    alias = await run_blocking(
        request,
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
    response_model=AliasPublic,
    responses={412: {"description": "stale If-Match"}, 428: {"description": "If-Match missing"}},
)
async def move_alias(
    name: NamePath,
    data: AliasMove,
    write: EvaluatorWrite,
    settings: SettingsDep,
    if_match: IfMatch = None,
) -> Response:
    """Move the alias to another frozen bank; compare-and-set on If-Match."""
    return await write(
        lambda session: service.move_alias(
            session=session,
            principal=write.principal,
            name=name,
            data=data,
            if_match=if_match,
            protected_names=settings.protected_aliases,
        ),
        headers=_etag_headers,
    )


@router.post(
    "/aliases/{name}/rollback",
    response_model=AliasPublic,
    responses={412: {"description": "stale If-Match"}},
)
async def rollback_alias(
    name: NamePath, data: AliasRollback, write: OperatorWrite, if_match: IfMatch = None
) -> Response:
    """Operator: point the alias back at an earlier bank (default: the previous one)."""
    return await write(
        lambda session: service.rollback_alias(
            session=session, principal=write.principal, name=name, data=data, if_match=if_match
        ),
        headers=_etag_headers,
    )


@router.get("/aliases/{name}/history")
async def alias_history(
    name: NamePath, session: SessionDep, _: Reader, paging: Pagination
) -> Page[AliasEventPublic]:
    """The alias's append-only history (who moved it where, when, why)."""
    return await run_read(
        service.history, session=session, name=name, limit=paging.limit, offset=paging.offset
    )
