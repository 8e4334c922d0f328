"""Tables: aliases and their append-only history."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field


class Alias(SQLModel, table=True):
    __tablename__ = "aliases"

    name: str = Field(primary_key=True, max_length=64)
    bank_id: int = Field(foreign_key="banks.id")
    revision: int = 1  # the If-Match ETag: every move is a compare-and-set on it
    protected: bool = False
    updated_by: str = Field(max_length=64)
    updated_at: datetime = created_at_field()


class AliasEvent(SQLModel, table=True):
    __tablename__ = "alias_events"
    __table_args__ = (UniqueConstraint("alias", "revision", name="uq_alias_events_revision"),)

    id: int | None = Field(default=None, primary_key=True)
    alias: str = Field(foreign_key="aliases.name", max_length=64, index=True)
    revision: int
    action: str = Field(max_length=16)
    from_bank_id: int | None = Field(default=None, foreign_key="banks.id")
    to_bank_id: int = Field(foreign_key="banks.id")
    actor: str = Field(max_length=64)
    role: str = Field(max_length=16)
    reason: str = Field(sa_type=Text)
    gate_decision_id: int | None = Field(default=None, foreign_key="gate_decisions.id")
    created_at: datetime = created_at_field()
