"""Column helpers shared by the table models of every domain."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field

from services.registry.db import JSONType


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """A timestamp stored in UTC and read back timezone-aware on every database.

    SQLite keeps no offset, so without this a time read back from it is naive and serialises
    without the trailing `Z` that Postgres's `timestamptz` gives: same request, other bytes.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
            if dialect.name == "sqlite":
                value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def created_at_field() -> Any:
    return Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


def optional_time_field() -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=True)


def json_field(*, nullable: bool = False, default: Any = None) -> Any:
    if nullable:
        return Field(default=None, sa_column=Column(JSONType, nullable=True))
    return Field(default_factory=default or dict, sa_column=Column(JSONType, nullable=False))
