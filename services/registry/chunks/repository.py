"""SQL for chunks, chunk versions and chunk texts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from services.registry.chunks.models import Chunk, ChunkText, ChunkVersion

VersionRow = tuple[ChunkVersion, str, dict[str, Any]]  # version, slug, content


def get_chunk(session: Session, chunk_id: int) -> Chunk | None:
    return session.get(Chunk, chunk_id)


def get_chunk_by_slug(session: Session, slug: str) -> Chunk | None:
    return session.execute(select(Chunk).where(Chunk.slug == slug)).scalar_one_or_none()


def add(session: Session, row: Chunk | ChunkVersion | ChunkText) -> None:
    session.add(row)
    session.flush()


def store_text(session: Session, content_hash: str, content: dict[str, Any]) -> None:
    """Store the text once per hash; a concurrent writer of the same text is not a conflict."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(
        insert(ChunkText)
        .values(content_hash=content_hash, content=content)
        .on_conflict_do_nothing(index_elements=["content_hash"])
    )


def get_text(session: Session, content_hash: str) -> ChunkText | None:
    return session.get(ChunkText, content_hash)


def latest_version(session: Session, chunk_id: int) -> ChunkVersion | None:
    return session.execute(
        select(ChunkVersion)
        .where(ChunkVersion.chunk_id == chunk_id)
        .order_by(ChunkVersion.version.desc())
        .limit(1)
    ).scalar_one_or_none()


def _version_query():
    return (
        select(ChunkVersion, Chunk.slug, ChunkText.content)
        .join(Chunk, Chunk.id == ChunkVersion.chunk_id)
        .join(ChunkText, ChunkText.content_hash == ChunkVersion.content_hash)
    )


def version_rows(session: Session, version_ids: Iterable[int]) -> dict[int, VersionRow]:
    ids = sorted(set(version_ids))
    if not ids:
        return {}
    rows = session.execute(_version_query().where(ChunkVersion.id.in_(ids))).all()
    return {row[0].id: (row[0], row[1], row[2]) for row in rows}


def version_row_by_number(session: Session, chunk_id: int, version: int) -> VersionRow | None:
    row = session.execute(
        _version_query().where(ChunkVersion.chunk_id == chunk_id, ChunkVersion.version == version)
    ).first()
    return None if row is None else (row[0], row[1], row[2])


def latest_version_rows(session: Session, chunk_ids: Iterable[int]) -> dict[int, VersionRow]:
    ids = sorted(set(chunk_ids))
    if not ids:
        return {}
    latest = (
        select(ChunkVersion.chunk_id, func.max(ChunkVersion.version).label("version"))
        .where(ChunkVersion.chunk_id.in_(ids))
        .group_by(ChunkVersion.chunk_id)
        .subquery()
    )
    rows = session.execute(
        _version_query().join(
            latest,
            (latest.c.chunk_id == ChunkVersion.chunk_id)
            & (latest.c.version == ChunkVersion.version),
        )
    ).all()
    return {row[0].chunk_id: (row[0], row[1], row[2]) for row in rows}


def list_chunks(
    session: Session, *, slug_prefix: str | None, limit: int, offset: int
) -> tuple[Sequence[Chunk], int]:
    filters = [Chunk.slug.startswith(slug_prefix, autoescape=True)] if slug_prefix else []
    total = session.execute(select(func.count()).select_from(Chunk).where(*filters)).scalar_one()
    rows = (
        session.execute(
            select(Chunk).where(*filters).order_by(Chunk.id).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def list_versions(
    session: Session, *, chunk_id: int, source: str | None, limit: int, offset: int
) -> tuple[list[VersionRow], int]:
    filters = [ChunkVersion.chunk_id == chunk_id]
    if source is not None:
        filters.append(ChunkVersion.source == source)
    total = session.execute(
        select(func.count()).select_from(ChunkVersion).where(*filters)
    ).scalar_one()
    rows = session.execute(
        _version_query().where(*filters).order_by(ChunkVersion.version).limit(limit).offset(offset)
    ).all()
    return [(row[0], row[1], row[2]) for row in rows], total
