"""HTTP routes for chunks and chunk versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from sqlmodel import Session

from services.registry.chunks import service
from services.registry.deps import AnalystWrite, Pagination, Reader, SessionDep
from services.registry.paths import IdPath
from services.registry.threads import run_read
from services.registry.unit_of_work import Written
from shared.contracts.registry_api.schemas import (
    ChunkCreate,
    ChunkPublic,
    ChunkSource,
    ChunkVersionCreate,
    ChunkVersionPublic,
    Page,
)

router = APIRouter(tags=["chunks"])


@router.post("/chunks", status_code=status.HTTP_201_CREATED, response_model=ChunkPublic)
async def create_chunk(data: ChunkCreate, write: AnalystWrite) -> Response:
    """Create a logical chunk and its version 1 (leak-checked)."""
    return await write(
        lambda session: service.create_chunk(session=session, principal=write.principal, data=data),
        status_code=status.HTTP_201_CREATED,
        headers=lambda chunk: {"Location": f"/v1/chunks/{chunk.id}"},
    )


@router.get("/chunks")
async def list_chunks(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    slug_prefix: Annotated[str | None, Query(max_length=64)] = None,
) -> Page[ChunkPublic]:
    """List chunks (each with its latest version), filtered by slug prefix."""
    return await run_read(
        service.list_chunks,
        session=session,
        slug_prefix=slug_prefix,
        limit=paging.limit,
        offset=paging.offset,
    )


@router.get("/chunks/{chunk_id}")
async def get_chunk(chunk_id: IdPath, session: SessionDep, _: Reader) -> ChunkPublic:
    """One chunk with its latest version."""
    return await run_read(service.get_chunk, session=session, chunk_id=chunk_id)


@router.post(
    "/chunks/{chunk_id}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=ChunkVersionPublic,
    responses={200: {"description": "content equals the latest version; nothing stored"}},
)
async def create_version(
    chunk_id: IdPath, data: ChunkVersionCreate, write: AnalystWrite
) -> Response:
    """Add a version (201); identical content to the latest version returns it (200)."""

    def work(session: Session) -> Written:
        version, created = service.create_version(
            session=session, principal=write.principal, chunk_id=chunk_id, data=data
        )
        return Written(
            version,
            status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            {"Location": f"/v1/chunks/{chunk_id}/versions/{version.version}"},
        )

    return await write(work)


@router.get("/chunks/{chunk_id}/versions")
async def list_versions(
    chunk_id: IdPath,
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    source: ChunkSource | None = None,
) -> Page[ChunkVersionPublic]:
    """The chunk's version history, oldest first."""
    return await run_read(
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
    return await run_read(service.get_version, session=session, chunk_id=chunk_id, version=version)


@router.get("/chunk-versions/{version_id}")
async def get_version_by_id(
    version_id: IdPath, session: SessionDep, _: Reader
) -> ChunkVersionPublic:
    """One chunk version by its global id (as banks and gate pools refer to it)."""
    return await run_read(service.get_version_by_id, session=session, version_id=version_id)
