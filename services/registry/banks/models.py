"""Tables: banks (draft -> frozen -> retired) and their ordered entries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, optional_time_field


class Bank(SQLModel, table=True):
    __tablename__ = "banks"
    __table_args__ = (
        CheckConstraint("status IN ('draft', 'frozen', 'retired')", name="ck_banks_status"),
        CheckConstraint("status = 'draft' OR content_hash IS NOT NULL", name="ck_banks_hash"),
    )

    id: int | None = Field(default=None, primary_key=True)
    status: str = Field(default="draft", max_length=16, index=True)
    q: float
    round: int = Field(index=True)
    parent_bank_id: int | None = Field(default=None, foreign_key="banks.id")
    # The FK to gate_decisions is added by the migration (the two tables refer to each other).
    gate_decision_id: int | None = Field(default=None)
    note: str | None = Field(default=None, sa_type=Text)
    content_hash: str | None = Field(default=None, max_length=64)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()
    frozen_at: datetime | None = optional_time_field()
    retired_at: datetime | None = optional_time_field()


class BankEntry(SQLModel, table=True):
    __tablename__ = "bank_entries"
    # One version per logical chunk: old and new versions of a chunk never share a bank.
    __table_args__ = (
        UniqueConstraint("bank_id", "position", name="uq_bank_entries_position"),
        UniqueConstraint("bank_id", "chunk_id", name="uq_bank_entries_chunk"),
    )

    id: int | None = Field(default=None, primary_key=True)
    bank_id: int = Field(foreign_key="banks.id", index=True)
    position: int
    chunk_id: int = Field(foreign_key="chunks.id")
    chunk_version_id: int = Field(foreign_key="chunk_versions.id")
    rho: float
    coefficient: float | None = None
