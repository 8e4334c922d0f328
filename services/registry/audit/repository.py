"""SQL for the audit log: insert and filtered listing, nothing else (it is append-only)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlmodel import Session

from services.registry.audit.models import AuditEntry

# A Core statement built once: every write appends one entry, and an ORM flush costs several
# times the statement itself (the entry is never read back in the writing transaction).
_INSERT_ENTRY = insert(AuditEntry.__table__)


def append(session: Session, values: dict[str, Any]) -> None:
    """Insert one entry: every column but `id`."""
    session.connection().execute(_INSERT_ENTRY, values)


def list_entries(
    session: Session,
    *,
    object_type: str | None,
    object_id: str | None,
    actor: str | None,
    action: str | None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int,
    offset: int,
) -> tuple[Sequence[AuditEntry], int]:
    filters = []
    if object_type is not None:
        filters.append(AuditEntry.object_type == object_type)
    if object_id is not None:
        filters.append(AuditEntry.object_id == object_id)
    if actor is not None:
        filters.append(AuditEntry.actor == actor)
    if action is not None:
        filters.append(AuditEntry.action == action)
    if since is not None:
        filters.append(AuditEntry.at >= since)
    if until is not None:
        filters.append(AuditEntry.at < until)
    total = session.execute(
        select(func.count()).select_from(AuditEntry).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(AuditEntry).where(*filters).order_by(AuditEntry.id).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total
