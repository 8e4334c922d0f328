"""Table: the first response to each (actor, Idempotency-Key), replayed on a retry."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import LargeBinary
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class IdempotencyRecord(SQLModel, table=True):
    __tablename__ = "idempotency_records"

    actor: str = Field(primary_key=True, max_length=64)
    key: str = Field(primary_key=True, max_length=255)
    method: str = Field(max_length=8)
    path: str = Field(max_length=2000)
    request_hash: str = Field(max_length=64)
    status_code: int | None = None
    body: bytes | None = Field(default=None, sa_type=LargeBinary)
    headers: dict[str, Any] = json_field()
    created_at: datetime = created_at_field()
