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


# Any fixed 64-bit number, the same in every registry process on one database.
_COMMIT_ORDER_LOCK = 0x1A5D17_0001


def append_in_commit_order(session: Session, entries: list[dict[str, Any]]) -> None:
    """Insert entries (every column but `id`) as the transaction's last statement.

    Postgres draws ids from a sequence when the row is inserted, not when it commits: a writer
    that inserts id 7 and commits after the writer of id 8 lands behind a reader that already
    read past 8. So ids are drawn under a transaction-scoped advisory lock that the commit
    releases: one writer at a time between its audit insert and its commit, and id order is
    commit order. SQLite needs nothing: it has one writer at a time already.
    """
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_COMMIT_ORDER_LOCK})")
    connection.execute(_INSERT_ENTRY, entries)


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


def first_action(session: Session, *, object_type: str, object_id: str) -> str | None:
    """The action of an object's first audit entry (the write that made it), or None."""
    return session.execute(
        select(AuditEntry.action)
        .where(AuditEntry.object_type == object_type, AuditEntry.object_id == object_id)
        .order_by(AuditEntry.id)
        .limit(1)
    ).scalar_one_or_none()
