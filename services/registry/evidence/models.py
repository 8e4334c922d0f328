"""Tables: trainer checkpoints and all-wrong group evidence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Text
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class Checkpoint(SQLModel, table=True):
    __tablename__ = "checkpoints"

    id: str = Field(primary_key=True, max_length=64)
    uri: str = Field(sa_type=Text)
    step: int
    round: int = Field(index=True)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class AllWrongGroup(SQLModel, table=True):
    __tablename__ = "all_wrong_groups"

    id: int | None = Field(default=None, primary_key=True)
    task_id: str = Field(max_length=200, index=True)
    round: int = Field(index=True)
    step: int
    group_index: int
    treatment: dict[str, Any] = json_field()
    bank_id: int = Field(foreign_key="banks.id")
    checkpoint_id: str = Field(foreign_key="checkpoints.id", max_length=64)
    retry_outcome: str = Field(default="pending", max_length=16, index=True)
    retry_trace_uri: str | None = Field(default=None, sa_type=Text)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()
