"""SQL for idempotency records."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session

from services.registry.idempotency.models import IdempotencyRecord


def get(session: Session, *, actor: str, key: str) -> IdempotencyRecord | None:
    statement = (
        select(IdempotencyRecord)
        .where(IdempotencyRecord.actor == actor, IdempotencyRecord.key == key)
        .execution_options(populate_existing=True)
    )
    return session.execute(statement).scalar_one_or_none()


def insert_claim(session: Session, record: IdempotencyRecord) -> None:
    session.add(record)
    session.flush()


def fill_response(
    session: Session, record: IdempotencyRecord, *, status_code: int, body: bytes, headers: dict
) -> None:
    record.status_code = status_code
    record.body = body
    record.headers = headers
    session.add(record)
    session.flush()
