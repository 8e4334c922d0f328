"""Tables: gate runs, their raw per-task observations, and decisions with one row per version."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.registry.models_base import created_at_field, json_field


class GateRun(SQLModel, table=True):
    __tablename__ = "gate_runs"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(default="online", max_length=16, index=True)
    round: int = Field(index=True)
    checkpoint_id: str = Field(foreign_key="checkpoints.id", max_length=64)
    # None for Gate A: its pool is cold-start drafts that are in no bank yet.
    base_bank_id: int | None = Field(default=None, foreign_key="banks.id")
    candidate_pool: dict[str, Any] = json_field()
    split: str = Field(default="val", max_length=64)
    sample_id: int = 0
    mask_seed: int = Field(sa_type=BigInteger)
    budget: int = 10
    solver: str = Field(default="statsmodels", max_length=32)
    # The three below are None only on runs recorded before migration 0002.
    n_tasks: int | None = None
    identity: dict[str, Any] | None = json_field(nullable=True)
    bare_baseline: dict[str, Any] | None = json_field(nullable=True)
    status: str = Field(default="open", max_length=16, index=True)
    note: str | None = Field(default=None, sa_type=Text)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class GateObservation(SQLModel, table=True):
    __tablename__ = "gate_observations"
    # A duplicate completed record for one (task, sample) is an error, as in the reference.
    __table_args__ = (
        UniqueConstraint("gate_run_id", "task_id", "sample_id", name="uq_gate_observations_task"),
    )

    id: int | None = Field(default=None, primary_key=True)
    gate_run_id: int = Field(foreign_key="gate_runs.id", index=True)
    task_id: str = Field(max_length=200)
    sample_id: int = 0
    inclusion: list[int] = json_field(default=list)
    slot_states: list[int] | None = json_field(nullable=True)
    bare: dict[str, float] = json_field()
    masked: dict[str, float] = json_field()
    created_at: datetime = created_at_field()


class GateDecision(SQLModel, table=True):
    __tablename__ = "gate_decisions"

    id: int | None = Field(default=None, primary_key=True)
    gate_run_id: int = Field(foreign_key="gate_runs.id", unique=True)
    estimator: str = Field(max_length=200)
    primary_component: str = Field(max_length=200)
    # The fit of an incomplete gate, kept for audit: no bank or alias move may cite it.
    provisional: bool = False
    n_observations: int
    note: str | None = Field(default=None, sa_type=Text)
    created_by: str = Field(max_length=64)
    created_at: datetime = created_at_field()


class GateDecisionRow(SQLModel, table=True):
    __tablename__ = "gate_decision_rows"
    __table_args__ = (
        UniqueConstraint("decision_id", "chunk_version_id", name="uq_gate_decision_rows_version"),
    )

    id: int | None = Field(default=None, primary_key=True)
    decision_id: int = Field(foreign_key="gate_decisions.id", index=True)
    chunk_version_id: int = Field(foreign_key="chunk_versions.id")
    kind: str = Field(max_length=16)
    slot: int
    coefficients: dict[str, float] = json_field()
    rank: int | None = None
    status: str = Field(max_length=16)
    hc3_se: dict[str, float] | None = json_field(nullable=True)
    ci_low: dict[str, float] | None = json_field(nullable=True)
    ci_high: dict[str, float] | None = json_field(nullable=True)
