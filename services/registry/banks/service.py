"""Banks: drafts, freezing (content hash), retirement, documents, diff, render, operator edits."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from sqlmodel import Session

from services.registry.aliases import repository as aliases_repository
from services.registry.audit import service as audit
from services.registry.banks import repository
from services.registry.banks.cache import CachedBank
from services.registry.banks.models import Bank, BankEntry
from services.registry.chunks import repository as chunks_repository
from services.registry.chunks import service as chunks
from services.registry.concurrency import quote_etag
from services.registry.errors import (
    Conflict,
    FieldInvalid,
    Forbidden,
    IntegrityViolation,
    NotFound,
)
from services.registry.gates import service as gates
from services.registry.models_base import utcnow
from services.registry.pagination import page
from shared.contracts.chunks import (
    RENDERER_VERSION,
    InjectedChunk,
    render_skill_block,
    select_injected,
)
from shared.contracts.hashing import content_hash
from shared.contracts.registry_api.schemas import (
    BankCreate,
    BankDiff,
    BankEntryIn,
    BankEntryPublic,
    BankPublic,
    BankStatus,
    BankSummary,
    BankUpdate,
    ChunkRef,
    ChunkRestore,
    ChunkRetire,
    Page,
    RenderedBank,
    RewrittenChunk,
    RhoChange,
    Role,
)
from shared.kit.auth import Principal


def require_bank(session: Session, bank_id: int) -> Bank:
    bank = repository.get(session, bank_id)
    if bank is None:
        raise NotFound("bank", bank_id)
    return bank


def _entry_views(session: Session, entries: Sequence[BankEntry]) -> list[BankEntryPublic]:
    versions = chunks.version_views(session, [entry.chunk_version_id for entry in entries])
    views = []
    for entry in entries:
        version = versions[entry.chunk_version_id]
        views.append(
            BankEntryPublic(
                position=entry.position,
                chunk_id=version.chunk_id,
                slug=version.slug,
                version=version.version,
                chunk_version_id=version.id,
                rho=entry.rho,
                coefficient=entry.coefficient,
                content_hash=version.content_hash,
                content=version.content,
            )
        )
    return views


def document(session: Session, bank: Bank) -> BankPublic:
    """The bank document (entries with their content, in bank order)."""
    return BankPublic(
        id=bank.id,
        q=bank.q,
        round=bank.round,
        parent_bank_id=bank.parent_bank_id,
        gate_decision_id=bank.gate_decision_id,
        note=bank.note,
        content_hash=bank.content_hash,
        frozen_at=bank.frozen_at,
        created_by=bank.created_by,
        created_at=bank.created_at,
        entries=_entry_views(session, repository.entries(session, bank.id)),
    )


def summary(session: Session, bank: Bank, n_entries: int | None = None) -> BankSummary:
    if n_entries is None:
        n_entries = repository.entry_counts(session, [bank.id]).get(bank.id, 0)
    return BankSummary(
        id=bank.id,
        status=BankStatus(bank.status),
        q=bank.q,
        round=bank.round,
        parent_bank_id=bank.parent_bank_id,
        gate_decision_id=bank.gate_decision_id,
        content_hash=bank.content_hash,
        n_entries=n_entries,
        created_by=bank.created_by,
        created_at=bank.created_at,
        frozen_at=bank.frozen_at,
        retired_at=bank.retired_at,
    )


def bank_content_hash(bank: Bank, entries: Sequence[BankEntryPublic]) -> str:
    """The frozen bank's identity: everything a prompt or a curriculum depends on."""
    return content_hash(
        {
            "q": bank.q,
            "round": bank.round,
            "parent_bank_id": bank.parent_bank_id,
            "gate_decision_id": bank.gate_decision_id,
            "entries": [
                {
                    "chunk_id": entry.chunk_id,
                    "slug": entry.slug,
                    "version": entry.version,
                    "content_hash": entry.content_hash,
                    "rho": entry.rho,
                    "coefficient": entry.coefficient,
                }
                for entry in entries
            ],
        }
    )


def load_cached_document(*, session: Session, bank_id: int) -> tuple[CachedBank, bool]:
    """The document as bytes with its strong ETag; the flag says whether it is immutable."""
    bank = require_bank(session, bank_id)
    doc = document(session, bank)
    body = orjson.dumps(doc.model_dump(mode="json"))
    if bank.status == BankStatus.draft:
        return CachedBank(etag="", body=body), False
    # The hash is a check, not a label: a frozen bank whose stored rows no longer hash to it
    # was changed behind the registry's back, and is not served under its old identity.
    if bank_content_hash(bank, doc.entries) != bank.content_hash:
        raise IntegrityViolation(
            f"bank {bank_id} no longer matches its content hash; refusing to serve it "
            "(restore it from backup or the audit log)"
        )
    return CachedBank(etag=quote_etag(bank.content_hash or ""), body=body), True


def _check_references(
    session: Session,
    *,
    parent_bank_id: int | None,
    gate_decision_id: int | None,
) -> None:
    if parent_bank_id is not None and repository.get(session, parent_bank_id) is None:
        raise FieldInvalid(("body", "parent_bank_id"), f"bank {parent_bank_id} not found")
    if gate_decision_id is not None:
        gates.require_final_decision(session, gate_decision_id, ("body", "gate_decision_id"))


def _build_entries(
    session: Session, bank_id: int, entries: Sequence[BankEntryIn]
) -> list[BankEntry]:
    versions = chunks.require_versions(
        session,
        [entry.chunk_version_id for entry in entries],
        loc=lambda index: ("body", "entries", index, "chunk_version_id"),
    )
    seen: set[int] = set()
    rows = []
    for position, entry in enumerate(entries):
        version = versions[entry.chunk_version_id]
        if version.chunk_id in seen:
            raise FieldInvalid(
                ("body", "entries", position, "chunk_version_id"),
                f"chunk {version.slug!r} appears twice; a bank holds one version per chunk",
            )
        seen.add(version.chunk_id)
        rows.append(
            BankEntry(
                bank_id=bank_id,
                position=position,
                chunk_id=version.chunk_id,
                chunk_version_id=version.id,
                rho=entry.rho,
                coefficient=entry.coefficient,
            )
        )
    return rows


def _insert_draft(
    *,
    session: Session,
    principal: Principal,
    q: float,
    round: int,
    parent_bank_id: int | None,
    gate_decision_id: int | None,
    note: str | None,
    entries: Sequence[BankEntryIn],
    action: str,
) -> BankPublic:
    bank = Bank(
        status=BankStatus.draft.value,
        q=q,
        round=round,
        parent_bank_id=parent_bank_id,
        gate_decision_id=gate_decision_id,
        note=note,
        created_by=principal.name,
    )
    repository.add(session, bank)
    repository.add_entries(session, _build_entries(session, bank.id, entries))
    public = document(session, bank)
    audit.record(
        session=session,
        principal=principal,
        action=action,
        object_type="bank",
        object_id=bank.id,
        after=public,
    )
    return public


def _entries_in(public: BankPublic) -> list[BankEntryIn]:
    return [
        BankEntryIn(chunk_version_id=e.chunk_version_id, rho=e.rho, coefficient=e.coefficient)
        for e in public.entries
    ]


# Drafts an operator alone may make (retire or restore a chunk); they stay the operator's.
OPERATOR_DRAFTS = ("bank.retire_chunk", "bank.restore_chunk")


def _require_draft_editor(session: Session, principal: Principal, bank: Bank) -> None:
    """403 unless `principal` may edit or copy the draft `bank`: an operator's retire or
    restore draft is the operator's until it is frozen, or another role could put the retired
    chunk back (PATCH, or copy + PATCH) and freeze the result."""
    if principal.role == Role.operator or bank.status != BankStatus.draft:
        return
    made = audit.made_by(session, object_type="bank", object_id=bank.id)
    if made in OPERATOR_DRAFTS:
        raise Forbidden(
            f"bank {bank.id} is an operator's draft ({made}); only an operator edits or "
            "copies it before it is frozen"
        )


def create_bank(*, session: Session, principal: Principal, data: BankCreate) -> BankPublic:
    """A new draft: explicit entries, or a copy of `from_bank_id` (its parent by default)."""
    entries = list(data.entries)
    parent_bank_id = data.parent_bank_id
    if data.from_bank_id is not None:
        if entries:
            raise FieldInvalid(("body", "entries"), "give entries or from_bank_id, not both")
        source = repository.get(session, data.from_bank_id)
        if source is None:
            raise FieldInvalid(("body", "from_bank_id"), f"bank {data.from_bank_id} not found")
        _require_draft_editor(session, principal, source)
        entries = _entries_in(document(session, source))
        parent_bank_id = parent_bank_id or source.id
    _check_references(
        session, parent_bank_id=parent_bank_id, gate_decision_id=data.gate_decision_id
    )
    return _insert_draft(
        session=session,
        principal=principal,
        q=data.q,
        round=data.round,
        parent_bank_id=parent_bank_id,
        gate_decision_id=data.gate_decision_id,
        note=data.note,
        entries=entries,
        action="bank.create",
    )


def update_bank(
    *, session: Session, principal: Principal, bank_id: int, data: BankUpdate
) -> BankPublic:
    """Change a draft's settings or entries; a frozen or retired bank is immutable (409)."""
    parent = data.parent_bank_id if "parent_bank_id" in data.model_fields_set else None
    repository.lock_in_id_order(session, [bank_id] if parent is None else [bank_id, parent])
    bank = repository.get_for_update(session, bank_id)
    if bank is None:
        raise NotFound("bank", bank_id)
    if bank.status != BankStatus.draft:
        raise Conflict(f"bank {bank_id} is {bank.status}; only drafts can change")
    _require_draft_editor(session, principal, bank)
    before = document(session, bank)
    changes = data.model_dump(exclude_unset=True, exclude={"entries"})
    _check_references(
        session,
        parent_bank_id=changes.get("parent_bank_id"),
        gate_decision_id=changes.get("gate_decision_id"),
    )
    if parent is not None and (
        parent == bank_id or bank_id in repository.ancestors(session, parent)
    ):
        raise FieldInvalid(
            ("body", "parent_bank_id"), f"bank {parent} descends from bank {bank_id}: a cycle"
        )
    for field, value in changes.items():
        setattr(bank, field, value)
    repository.add(session, bank)
    if data.entries is not None:
        rows = _build_entries(session, bank_id, data.entries)
        repository.delete_entries(session, bank_id)
        repository.add_entries(session, rows)
    after = document(session, bank)
    audit.record(
        session=session,
        principal=principal,
        action="bank.update",
        object_type="bank",
        object_id=bank_id,
        before=before,
        after=after,
    )
    return after


def freeze_bank(*, session: Session, principal: Principal, bank_id: int) -> BankSummary:
    """Draft -> frozen: compute the content hash; from then on the bank never changes."""
    # Locked before the entries are read: a PATCH of the entries either commits first (and
    # the hash covers its entries) or waits and then finds the bank frozen (409).
    bank = repository.get_for_update(session, bank_id)
    if bank is None:
        raise NotFound("bank", bank_id)
    if bank.status != BankStatus.draft:
        raise Conflict(f"bank {bank_id} is {bank.status}; only a draft can be frozen")
    doc = document(session, bank)
    digest = bank_content_hash(bank, doc.entries)
    if not repository.transition(
        session,
        bank_id=bank_id,
        from_status=BankStatus.draft.value,
        to_status=BankStatus.frozen.value,
        content_hash=digest,
        frozen_at=utcnow(),
    ):
        raise Conflict(f"bank {bank_id} changed status concurrently")
    session.refresh(bank)
    after = summary(session, bank, len(doc.entries))
    audit.record(
        session=session,
        principal=principal,
        action="bank.freeze",
        object_type="bank",
        object_id=bank_id,
        before={"status": "draft"},
        after=after,
    )
    return after


def retire_bank(*, session: Session, principal: Principal, bank_id: int) -> BankSummary:
    """Frozen -> retired; refused (409) while an alias points at the bank."""
    # Locked first: an alias being pointed at this bank holds a share lock until it commits.
    bank = repository.get_for_update(session, bank_id)
    if bank is None:
        raise NotFound("bank", bank_id)
    if bank.status != BankStatus.frozen:
        raise Conflict(f"bank {bank_id} is {bank.status}; only a frozen bank can be retired")
    names = aliases_repository.names_pointing_at(session, bank_id)
    if names:
        raise Conflict(f"bank {bank_id} is still the target of alias(es) {', '.join(names)}")
    if not repository.transition(
        session,
        bank_id=bank_id,
        from_status=BankStatus.frozen.value,
        to_status=BankStatus.retired.value,
        retired_at=utcnow(),
    ):
        raise Conflict(f"bank {bank_id} changed status concurrently")
    session.refresh(bank)
    after = summary(session, bank)
    audit.record(
        session=session,
        principal=principal,
        action="bank.retire",
        object_type="bank",
        object_id=bank_id,
        before={"status": "frozen"},
        after=after,
    )
    return after


def get_summary(*, session: Session, bank_id: int) -> BankSummary:
    """Status and counts of one bank."""
    return summary(session, require_bank(session, bank_id))


def list_banks(
    *,
    session: Session,
    status: BankStatus | None,
    round: int | None,
    parent_bank_id: int | None,
    limit: int,
    offset: int,
) -> Page[BankSummary]:
    """Bank summaries by id, filtered."""
    rows, total = repository.list_banks(
        session,
        status=None if status is None else status.value,
        round=round,
        parent_bank_id=parent_bank_id,
        limit=limit,
        offset=offset,
    )
    counts = repository.entry_counts(session, [bank.id for bank in rows])
    return page(
        [summary(session, bank, counts.get(bank.id, 0)) for bank in rows], total, limit, offset
    )


def diff(*, session: Session, bank_id: int, against: int) -> BankDiff:
    """What changed from bank `against` to bank `bank_id`, by logical chunk."""
    old = document(session, require_bank(session, against))
    new = document(session, require_bank(session, bank_id))
    old_by_chunk = {entry.chunk_id: entry for entry in old.entries}
    new_by_chunk = {entry.chunk_id: entry for entry in new.entries}

    def ref(entry: BankEntryPublic) -> ChunkRef:
        return ChunkRef(
            chunk_id=entry.chunk_id,
            slug=entry.slug,
            version=entry.version,
            chunk_version_id=entry.chunk_version_id,
        )

    common = [entry.chunk_id for entry in new.entries if entry.chunk_id in old_by_chunk]
    old_order = [entry.chunk_id for entry in old.entries if entry.chunk_id in new_by_chunk]
    return BankDiff(
        from_bank_id=against,
        to_bank_id=bank_id,
        added=[ref(e) for e in new.entries if e.chunk_id not in old_by_chunk],
        retired=[ref(e) for e in old.entries if e.chunk_id not in new_by_chunk],
        rewritten=[
            RewrittenChunk(
                chunk_id=cid,
                slug=new_by_chunk[cid].slug,
                from_version=old_by_chunk[cid].version,
                to_version=new_by_chunk[cid].version,
            )
            for cid in common
            if old_by_chunk[cid].version != new_by_chunk[cid].version
        ],
        rho_changes=[
            RhoChange(
                chunk_id=cid,
                slug=new_by_chunk[cid].slug,
                from_rho=old_by_chunk[cid].rho,
                to_rho=new_by_chunk[cid].rho,
            )
            for cid in common
            if old_by_chunk[cid].rho != new_by_chunk[cid].rho
        ],
        order_changed=common != old_order,
    )


def parse_inclusion(raw: str | None, size: int) -> list[int]:
    """'1,0,1' -> [1, 0, 1]; None means every chunk; 422 naming `inclusion` otherwise."""
    loc = ("query", "inclusion")
    if raw is None:
        return [1] * size
    parts = [] if raw.strip() == "" else [part.strip() for part in raw.split(",")]
    if any(part not in {"0", "1"} for part in parts):
        raise FieldInvalid(loc, "inclusion must be comma-separated 0/1 values, e.g. 1,0,1")
    if len(parts) != size:
        raise FieldInvalid(loc, f"inclusion has {len(parts)} entries; the bank has {size} chunks")
    return [int(part) for part in parts]


def render(*, session: Session, bank_id: int, inclusion: str | None) -> RenderedBank:
    """The exact skill block a prompt carries for this inclusion vector ('' when empty)."""
    doc = document(session, require_bank(session, bank_id))
    vector = parse_inclusion(inclusion, len(doc.entries))
    chunks_in_order = [
        InjectedChunk(chunk_id=entry.slug, version=entry.version, content=entry.content)
        for entry in doc.entries
    ]
    injected = select_injected(chunks_in_order, vector)
    included = [entry for entry, flag in zip(doc.entries, vector, strict=True) if flag]
    return RenderedBank(
        bank_id=bank_id,
        inclusion=vector,
        injected=[
            ChunkRef(
                chunk_id=e.chunk_id,
                slug=e.slug,
                version=e.version,
                chunk_version_id=e.chunk_version_id,
            )
            for e in included
        ],
        renderer=RENDERER_VERSION,
        text=render_skill_block(injected),
    )


def retire_chunk(
    *, session: Session, principal: Principal, bank_id: int, data: ChunkRetire
) -> BankPublic:
    """Operator: a new draft, child of `bank_id`, without the chunk; nothing else changes."""
    source = document(session, require_bank(session, bank_id))
    if all(entry.chunk_id != data.chunk_id for entry in source.entries):
        raise FieldInvalid(("body", "chunk_id"), f"chunk {data.chunk_id} is not in bank {bank_id}")
    return _insert_draft(
        session=session,
        principal=principal,
        q=source.q,
        round=source.round,
        parent_bank_id=bank_id,
        gate_decision_id=None,
        note=f"operator retired chunk {data.chunk_id}: {data.reason}",
        entries=[e for e in _entries_in(source) if _chunk_of(source, e) != data.chunk_id],
        action="bank.retire_chunk",
    )


def _chunk_of(source: BankPublic, entry: BankEntryIn) -> int:
    return next(e.chunk_id for e in source.entries if e.chunk_version_id == entry.chunk_version_id)


def restore_chunk(
    *, session: Session, principal: Principal, bank_id: int, data: ChunkRestore
) -> BankPublic:
    """Operator: a new draft, child of `bank_id`, with the chunk (re)inserted."""
    source = document(session, require_bank(session, bank_id))
    if chunks_repository.get_chunk(session, data.chunk_id) is None:
        raise FieldInvalid(("body", "chunk_id"), f"chunk {data.chunk_id} not found")
    if data.version is None:
        row = chunks_repository.latest_version_rows(session, [data.chunk_id])[data.chunk_id]
    else:
        row = chunks_repository.version_row_by_number(session, data.chunk_id, data.version)
        if row is None:
            raise FieldInvalid(
                ("body", "version"), f"chunk {data.chunk_id} has no version {data.version}"
            )
    entries = [e for e in _entries_in(source) if _chunk_of(source, e) != data.chunk_id]
    new_entry = BankEntryIn(chunk_version_id=row[0].id, rho=data.rho, coefficient=data.coefficient)
    position = len(entries) if data.position is None else min(data.position, len(entries))
    entries.insert(position, new_entry)
    return _insert_draft(
        session=session,
        principal=principal,
        q=source.q,
        round=source.round,
        parent_bank_id=bank_id,
        gate_decision_id=None,
        note=f"operator restored chunk {data.chunk_id} v{row[0].version}: {data.reason}",
        entries=entries,
        action="bank.restore_chunk",
    )


def load_document_outside_request(*, session_factory, bank_id: int) -> tuple[CachedBank, bool]:
    """`load_cached_document` in a read-only session of its own (for the async hot path)."""
    with session_factory() as session:
        return load_cached_document(session=session, bank_id=bank_id)
