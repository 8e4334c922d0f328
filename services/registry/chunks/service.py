"""Chunks and their immutable versions: creation with dedup, leak checks, history."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sqlmodel import Session

from services.registry.audit import service as audit
from services.registry.cards import repository as cards_repository
from services.registry.chunks import repository
from services.registry.chunks.models import Chunk, ChunkVersion
from services.registry.concurrency import conflict_on_integrity
from services.registry.errors import Conflict, FieldInvalid, NotFound
from services.registry.pagination import page
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import (
    ChunkCreate,
    ChunkPublic,
    ChunkSource,
    ChunkVersionCreate,
    ChunkVersionPublic,
    Page,
    Provenance,
)
from shared.kit.auth import Principal
from shared.runtime.leak import find_leaks

Loc = tuple[str | int, ...]


def check_content(content: ChunkContent, *, loc: Loc) -> None:
    """422 naming the field when deployable chunk text carries a leak or a NUL character."""
    fields: list[tuple[Loc, str]] = [
        ((*loc, "title"), content.title),
        ((*loc, "applies_when"), content.applies_when),
        *(((*loc, "procedure", index), step) for index, step in enumerate(content.procedure)),
        ((*loc, "verify"), content.verify),
        ((*loc, "avoid"), content.avoid),
    ]
    for field_loc, text in fields:
        if "\x00" in text:
            raise FieldInvalid(field_loc, "text must not contain NUL characters")
        findings = find_leaks(text)
        if findings:
            finding = findings[0]
            raise FieldInvalid(
                field_loc,
                f"leak check: {finding.rule} ({finding.text!r}) may not appear in chunk text",
                f"leak.{finding.rule}",
            )


def _check_provenance(session: Session, provenance: Provenance, *, loc: Loc) -> None:
    known = cards_repository.existing_card_ids(session, provenance.card_ids)
    for index, card_id in enumerate(provenance.card_ids):
        if card_id not in known:
            raise FieldInvalid((*loc, "card_ids", index), f"failure card {card_id} not found")
    if provenance.candidate_id is not None and not cards_repository.get_candidate(
        session, provenance.candidate_id
    ):
        raise FieldInvalid((*loc, "candidate_id"), f"candidate {provenance.candidate_id} not found")


def version_public(row: repository.VersionRow) -> ChunkVersionPublic:
    version, slug, content = row
    return ChunkVersionPublic(
        id=version.id,
        chunk_id=version.chunk_id,
        slug=slug,
        version=version.version,
        content=ChunkContent.model_validate(content),
        content_hash=version.content_hash,
        source=ChunkSource(version.source),
        provenance=Provenance.model_validate(version.provenance),
        author=version.author,
        created_at=version.created_at,
    )


def version_views(session: Session, version_ids: Iterable[int]) -> dict[int, ChunkVersionPublic]:
    """Public views of the given version ids (missing ids are simply absent)."""
    return {
        vid: version_public(row)
        for vid, row in repository.version_rows(session, version_ids).items()
    }


def store_version(
    *,
    session: Session,
    principal: Principal,
    chunk: Chunk,
    content: ChunkContent,
    source: ChunkSource,
    provenance: Provenance,
) -> tuple[ChunkVersionPublic, bool]:
    """A new version of `chunk`, or its latest version when the content is unchanged.

    Text is stored once per content hash, so a revert to older text adds a version number but
    not a second copy of the text. The number is max+1 under a unique constraint: a racing
    writer that takes the same number gets 409.
    """
    content_hash = content.content_hash()
    latest = repository.latest_version(session, chunk.id)
    if latest is not None and latest.content_hash == content_hash:
        return version_public((latest, chunk.slug, content.model_dump(mode="json"))), False
    repository.store_text(session, content_hash, content.model_dump(mode="json"))
    version = ChunkVersion(
        chunk_id=chunk.id,
        version=1 if latest is None else latest.version + 1,
        content_hash=content_hash,
        source=source.value,
        provenance=provenance.model_dump(mode="json"),
        author=principal.name,
    )
    with conflict_on_integrity(
        f"chunk {chunk.id} got a new version concurrently; re-read it and retry", session
    ):
        repository.add(session, version)
    public = version_public((version, chunk.slug, content.model_dump(mode="json")))
    audit.record(
        session=session,
        principal=principal,
        action="chunk_version.create",
        object_type="chunk_version",
        object_id=version.id,
        after=public,
    )
    return public, True


def create_chunk(*, session: Session, principal: Principal, data: ChunkCreate) -> ChunkPublic:
    """A new logical chunk with its first version."""
    check_content(data.content, loc=("body", "content"))
    _check_provenance(session, data.provenance, loc=("body", "provenance"))
    chunk = new_chunk(session=session, principal=principal, slug=data.slug)
    latest, _ = store_version(
        session=session,
        principal=principal,
        chunk=chunk,
        content=data.content,
        source=data.source,
        provenance=data.provenance,
    )
    return ChunkPublic(
        id=chunk.id,
        slug=chunk.slug,
        created_by=chunk.created_by,
        created_at=chunk.created_at,
        latest=latest,
    )


def new_chunk(*, session: Session, principal: Principal, slug: str) -> Chunk:
    """Insert a logical chunk; 409 when the slug is taken."""
    if repository.get_chunk_by_slug(session, slug) is not None:
        raise Conflict(f"slug {slug!r} is already taken")
    chunk = Chunk(slug=slug, created_by=principal.name)
    with conflict_on_integrity(f"slug {slug!r} is already taken", session):
        repository.add(session, chunk)
    audit.record(
        session=session,
        principal=principal,
        action="chunk.create",
        object_type="chunk",
        object_id=chunk.id,
        after={"id": chunk.id, "slug": slug},
    )
    return chunk


def require_chunk(session: Session, chunk_id: int) -> Chunk:
    chunk = repository.get_chunk(session, chunk_id)
    if chunk is None:
        raise NotFound("chunk", chunk_id)
    return chunk


def create_version(
    *, session: Session, principal: Principal, chunk_id: int, data: ChunkVersionCreate
) -> tuple[ChunkVersionPublic, bool]:
    """A new version of a chunk (`created` False when the content equals the latest)."""
    chunk = require_chunk(session, chunk_id)
    check_content(data.content, loc=("body", "content"))
    _check_provenance(session, data.provenance, loc=("body", "provenance"))
    return store_version(
        session=session,
        principal=principal,
        chunk=chunk,
        content=data.content,
        source=data.source,
        provenance=data.provenance,
    )


def get_chunk(*, session: Session, chunk_id: int) -> ChunkPublic:
    """One chunk with its latest version."""
    chunk = require_chunk(session, chunk_id)
    latest = repository.latest_version_rows(session, [chunk.id])[chunk.id]
    return ChunkPublic(
        id=chunk.id,
        slug=chunk.slug,
        created_by=chunk.created_by,
        created_at=chunk.created_at,
        latest=version_public(latest),
    )


def list_chunks(
    *, session: Session, slug_prefix: str | None, limit: int, offset: int
) -> Page[ChunkPublic]:
    """Chunks by id, each with its latest version."""
    chunks, total = repository.list_chunks(
        session, slug_prefix=slug_prefix, limit=limit, offset=offset
    )
    latest = repository.latest_version_rows(session, [chunk.id for chunk in chunks])
    items = [
        ChunkPublic(
            id=chunk.id,
            slug=chunk.slug,
            created_by=chunk.created_by,
            created_at=chunk.created_at,
            latest=version_public(latest[chunk.id]),
        )
        for chunk in chunks
    ]
    return page(items, total, limit, offset)


def list_versions(
    *, session: Session, chunk_id: int, source: ChunkSource | None, limit: int, offset: int
) -> Page[ChunkVersionPublic]:
    """A chunk's version history, oldest first."""
    require_chunk(session, chunk_id)
    rows, total = repository.list_versions(
        session,
        chunk_id=chunk_id,
        source=None if source is None else source.value,
        limit=limit,
        offset=offset,
    )
    return page([version_public(row) for row in rows], total, limit, offset)


def get_version(*, session: Session, chunk_id: int, version: int) -> ChunkVersionPublic:
    """One numbered version of a chunk."""
    require_chunk(session, chunk_id)
    row = repository.version_row_by_number(session, chunk_id, version)
    if row is None:
        raise NotFound("chunk version", f"{chunk_id}/v{version}")
    return version_public(row)


def get_version_by_id(*, session: Session, version_id: int) -> ChunkVersionPublic:
    """One chunk version by its global id (the id banks and gate pools refer to)."""
    view = version_views(session, [version_id]).get(version_id)
    if view is None:
        raise NotFound("chunk version", version_id)
    return view


def require_versions(
    session: Session, version_ids: Sequence[int], *, loc: Callable[[int], Loc]
) -> dict[int, ChunkVersionPublic]:
    """Views of `version_ids`; 422 naming the first unknown one via `loc(index)`."""
    views = version_views(session, version_ids)
    for index, version_id in enumerate(version_ids):
        if version_id not in views:
            raise FieldInvalid(loc(index), f"chunk version {version_id} not found")
    return views
