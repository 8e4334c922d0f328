"""SQL for idempotency records."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from services.registry.idempotency.models import IdempotencyRecord
from services.registry.models_base import utcnow


def get(session: Session, *, actor: str, key: str) -> IdempotencyRecord | None:
    statement = (
        select(IdempotencyRecord)
        .where(IdempotencyRecord.actor == actor, IdempotencyRecord.key == key)
        .execution_options(populate_existing=True)
    )
    return session.execute(statement).scalar_one_or_none()


def claim(
    session: Session, *, actor: str, key: str, method: str, path: str, request_hash: str
) -> bool:
    """Insert the claim row unless the key has one; True when this request claimed it.

    One statement: on Postgres a concurrent insert of the same key makes it wait for that
    transaction, then do nothing if it committed (or insert if it rolled back).
    """
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    result = session.execute(
        insert(IdempotencyRecord.__table__)
        .values(
            actor=actor,
            key=key,
            method=method,
            path=path,
            request_hash=request_hash,
            headers={},
            created_at=utcnow(),  # a Core insert: the model's default does not apply
        )
        .on_conflict_do_nothing(index_elements=["actor", "key"])
        .returning(IdempotencyRecord.__table__.c.key)
    )
    return result.first() is not None


def fill_response(
    session: Session, *, actor: str, key: str, status_code: int, body: bytes, headers: dict
) -> None:
    table = IdempotencyRecord.__table__  # a Core UPDATE: the ORM's bulk-update path costs more
    session.execute(
        update(table)
        .where(table.c.actor == actor, table.c.key == key)
        .values(status_code=status_code, body=body, headers=headers)
    )
