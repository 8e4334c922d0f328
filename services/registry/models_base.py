"""Column helpers shared by the table models of every domain."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime
from sqlmodel import Field

from services.registry.db import JSONType


def utcnow() -> datetime:
    return datetime.now(UTC)


def created_at_field() -> Any:
    return Field(default_factory=utcnow, sa_type=DateTime(timezone=True), nullable=False)


def optional_time_field() -> Any:
    return Field(default=None, sa_type=DateTime(timezone=True), nullable=True)


def json_field(*, nullable: bool = False, default: Any = None) -> Any:
    if nullable:
        return Field(default=None, sa_column=Column(JSONType, nullable=True))
    return Field(default_factory=default or dict, sa_column=Column(JSONType, nullable=False))
