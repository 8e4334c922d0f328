"""Recording writes: every service function that changes state calls `record` once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session

from services.registry.audit import repository
from services.registry.cards.gold import withhold_gold
from services.registry.models_base import utcnow
from services.registry.pagination import page
from shared.contracts.registry_api.schemas import AuditEntryPublic, Page
from shared.kit.auth import Principal

_RECORDED = "audit_entries"  # session.info key: the entries this transaction will insert


def _document(value: BaseModel | dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    return value.model_dump(mode="json")


def record(
    *,
    session: Session,
    principal: Principal,
    action: str,
    object_type: str,
    object_id: object,
    before: BaseModel | dict[str, Any] | None = None,
    after: BaseModel | dict[str, Any] | None = None,
) -> None:
    """Append one audit entry to the write's transaction; it is inserted at the end of the
    unit of work (`insert_recorded`), just before the commit."""
    session.info.setdefault(_RECORDED, []).append(
        {
            "at": utcnow(),
            "actor": principal.name,
            "role": principal.role.value,
            "action": action,
            "object_type": object_type,
            "object_id": str(object_id),
            "before": _document(before),
            "after": _document(after),
        }
    )


def insert_recorded(session: Session) -> None:
    """Insert the entries recorded in this transaction, last thing before its commit, so that
    entry ids follow commit order (`repository.append_in_commit_order`)."""
    entries = session.info.pop(_RECORDED, None)
    if entries:
        repository.append_in_commit_order(session, entries)


def list_entries(
    *,
    session: Session,
    object_type: str | None,
    object_id: str | None,
    actor: str | None,
    action: str | None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int,
    offset: int,
) -> Page[AuditEntryPublic]:
    """Audit entries, oldest first, filtered (`since` inclusive, `until` exclusive)."""
    rows, total = repository.list_entries(
        session,
        object_type=object_type,
        object_id=object_id,
        actor=actor,
        action=action,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )
    return page([_entry_public(row) for row in rows], total, limit, offset)


def _entry_public(row: Any) -> AuditEntryPublic:
    entry = AuditEntryPublic.model_validate(row)
    if entry.object_type != "card":
        return entry
    # Card entries are written without gold; entries written before that are withheld here.
    return entry.model_copy(
        update={
            side: None if document is None else withhold_gold(document)
            for side, document in (("before", entry.before), ("after", entry.after))
        }
    )


def made_by(session: Session, *, object_type: str, object_id: object) -> str | None:
    """The audit action that created an object (its first entry), or None."""
    return repository.first_action(session, object_type=object_type, object_id=str(object_id))
