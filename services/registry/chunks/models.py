"""Tables: logical chunks, their immutable versions, and content stored once per hash."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class Chunk(SQLModel, table=True):
    __tablename__ = "chunks"

    id: int | None = Field(default=None, primary_key=True)
    slug: str = Field(max_length=64, unique=True, index=True)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class ChunkText(SQLModel, table=True):
    """Chunk content keyed by its hash: identical text is stored once, whichever chunk uses it."""

    __tablename__ = "chunk_texts"

    content_hash: str = Field(primary_key=True, max_length=64)
    content: dict[str, Any] = json_field()


class ChunkVersion(SQLModel, table=True):
    __tablename__ = "chunk_versions"
    # Version numbers are max+1 under this constraint: two racing writers cannot both get n.
    __table_args__ = (UniqueConstraint("chunk_id", "version", name="uq_chunk_versions_number"),)

    id: int | None = Field(default=None, primary_key=True)
    chunk_id: int = Field(foreign_key="chunks.id", index=True)
    version: int
    content_hash: str = Field(foreign_key="chunk_texts.content_hash", max_length=64, index=True)
    source: str = Field(max_length=16)
    provenance: dict[str, Any] = json_field()
    author: str = Field(max_length=64)
    created_at: datetime = created_at_field()
