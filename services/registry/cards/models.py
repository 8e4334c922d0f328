"""Tables: failure cards (privileged audit in its own table), candidates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Text
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class FailureCard(SQLModel, table=True):
    __tablename__ = "failure_cards"

    id: int | None = Field(default=None, primary_key=True)
    round: int = Field(index=True)
    task_id: str = Field(max_length=200, index=True)
    checkpoint_id: str | None = Field(default=None, foreign_key="checkpoints.id", max_length=64)
    evidence_id: int | None = Field(default=None, foreign_key="all_wrong_groups.id")
    outcome: str = Field(max_length=16, index=True)
    eligible: bool = Field(index=True)
    target_chunk_id: int | None = Field(default=None, foreign_key="chunks.id")
    deployable: dict[str, Any] | None = json_field(nullable=True)
    firewall_findings: list[dict[str, Any]] = json_field(default=list)
    forced_no_proposal_reason: str | None = Field(default=None, sa_type=Text)
    extras: dict[str, Any] = json_field()
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class CardAudit(SQLModel, table=True):
    """The gold-aware part of a card, kept apart so no deployable read path can touch it."""

    __tablename__ = "card_audits"

    card_id: int = Field(primary_key=True, foreign_key="failure_cards.id")
    privileged_audit: dict[str, Any] = json_field()


class Candidate(SQLModel, table=True):
    __tablename__ = "candidates"

    id: int | None = Field(default=None, primary_key=True)
    round: int = Field(index=True)
    operation: str = Field(max_length=16)
    target_chunk_id: int | None = Field(default=None, foreign_key="chunks.id")
    chunk_id: int = Field(foreign_key="chunks.id")
    chunk_version_id: int | None = Field(default=None, foreign_key="chunk_versions.id")
    # fingerprint(operation, target, content): unique within the round and against history.
    signature: str = Field(max_length=64, unique=True)
    source_card_ids: list[int] = json_field(default=list)
    failure_mechanism: str | None = Field(default=None, sa_type=Text)
    proposal_checkpoint: str | None = Field(default=None, max_length=64)
    status: str = Field(default="proposed", max_length=16, index=True)
    decision_id: int | None = Field(default=None, foreign_key="gate_decisions.id")
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class CandidateCitation(SQLModel, table=True):
    """A failure card cited by a candidate. The key makes citation exactly-once: a card backs
    at most one candidate per round, even when a retried compile posts again."""

    __tablename__ = "candidate_citations"

    card_id: int = Field(primary_key=True, foreign_key="failure_cards.id")
    round: int = Field(primary_key=True)
    candidate_id: int = Field(foreign_key="candidates.id", index=True)
