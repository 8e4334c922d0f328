"""HTTP routes for chunks and chunk versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from starlette.concurrency import run_in_threadpool

from services.registry.chunks import service
from services.registry.concurrency import IdempotentRoute
from services.registry.deps import Analyst, Pagination, Reader, SessionDep
from services.registry.paths import IdPath
from shared.registry_api.schemas import (
    ChunkCreate,
    ChunkPublic,
    ChunkSource,
    ChunkVersionCreate,
    ChunkVersionPublic,
    Page,
)

router = APIRouter(tags=["chunks"], route_class=IdempotentRoute)


@router.post("/chunks", status_code=status.HTTP_201_CREATED)
async def create_chunk(
    data: ChunkCreate, session: SessionDep, principal: Analyst, response: Response
) -> ChunkPublic:
    """Create a logical chunk and its version 1 (leak-checked)."""
    chunk = await run_in_threadpool(
        service.create_chunk, session=session, principal=principal, data=data
    )
    response.headers["Location"] = f"/v1/chunks/{chunk.id}"
    return chunk


@router.get("/chunks")
async def list_chunks(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    slug_prefix: Annotated[str | None, Query(max_length=64)] = None,
) -> Page[ChunkPublic]:
    """List chunks (each with its latest version), filtered by slug prefix."""
    return await run_in_threadpool(
        service.list_chunks,
        session=session,
        slug_prefix=slug_prefix,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/chunks/{chunk_id}")
async def get_chunk(chunk_id: IdPath, session: SessionDep, _: Reader) -> ChunkPublic:
    """One chunk with its latest version."""
    return await run_in_threadpool(service.get_chunk, session=session, chunk_id=chunk_id)


@router.post(
    "/chunks/{chunk_id}/versions",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"description": "content equals the latest version; nothing stored"}},
)
async def create_version(
    chunk_id: IdPath,
    data: ChunkVersionCreate,
    session: SessionDep,
    principal: Analyst,
    response: Response,
) -> ChunkVersionPublic:
    """Add a version (201); identical content to the latest version returns it (200)."""
    version, created = await run_in_threadpool(
        service.create_version, session=session, principal=principal, chunk_id=chunk_id, data=data
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/chunks/{chunk_id}/versions/{version.version}"
    return version


@router.get("/chunks/{chunk_id}/versions")
async def list_versions(
    chunk_id: IdPath,
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    source: ChunkSource | None = None,
) -> Page[ChunkVersionPublic]:
    """The chunk's version history, oldest first."""
    return await run_in_threadpool(
        service.list_versions,
        session=session,
        chunk_id=chunk_id,
        source=source,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/chunks/{chunk_id}/versions/{version}")
async def get_version(
    chunk_id: IdPath, version: IdPath, session: SessionDep, _: Reader
) -> ChunkVersionPublic:
    """One numbered version of a chunk."""
    return await run_in_threadpool(
        service.get_version, session=session, chunk_id=chunk_id, version=version
    )


@router.get("/chunk-versions/{version_id}")
async def get_version_by_id(
    version_id: IdPath, session: SessionDep, _: Reader
) -> ChunkVersionPublic:
    """One chunk version by its global id (as banks and gate pools refer to it)."""
    return await run_in_threadpool(
        service.get_version_by_id, session=session, version_id=version_id
    )
