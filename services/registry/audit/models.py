"""Table: the append-only audit log (the migration forbids UPDATE and DELETE on Postgres)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class AuditEntry(SQLModel, table=True):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_object", "object_type", "object_id"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = created_at_field()
    actor: str = Field(max_length=64, index=True)
    role: str = Field(max_length=16)
    action: str = Field(max_length=64, index=True)
    object_type: str = Field(max_length=32)
    object_id: str = Field(max_length=64)
    before: dict[str, Any] | None = json_field(nullable=True)
    after: dict[str, Any] | None = json_field(nullable=True)
