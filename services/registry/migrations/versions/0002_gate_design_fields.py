"""gate runs: typed kind, design and rollout identity; Gate A pools; provisional decisions

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 18:00:00.000000

- `gate_runs` gains `kind` (online | gate_a), `split`, `sample_id`, `budget`, `solver`,
  `n_tasks`, `identity` and `bare_baseline`; `base_bank_id` becomes nullable (a Gate A pool is
  cold-start drafts that are in no bank yet).
- `gate_decisions` gains `provisional` (the fit of an incomplete gate, kept for audit).
- Runs the evaluator recorded before this revision carried their protocol as a JSON line in
  `note` ({"intraskill-evaluator": {...}}); its kind, split, sample, budget, solver and task count
  are lifted into the new columns. Their note is left as it was, so nothing is lost; `identity`
  stays empty for them (the old line lacked the model and the action protocol).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
LEGACY_KEY = "intraskill-evaluator"
# Server defaults fill the rows that exist now; the models own the defaults afterwards.
FILLED = {
    "kind": (sqlmodel.sql.sqltypes.AutoString(length=16), "online"),
    "split": (sqlmodel.sql.sqltypes.AutoString(length=64), "val"),
    "sample_id": (sa.Integer(), "0"),
    "budget": (sa.Integer(), "10"),
    "solver": (sqlmodel.sql.sqltypes.AutoString(length=32), "statsmodels"),
}


def upgrade() -> None:
    with op.batch_alter_table("gate_runs") as batch:
        for name, (type_, default) in FILLED.items():
            batch.add_column(sa.Column(name, type_, nullable=False, server_default=default))
        batch.add_column(sa.Column("n_tasks", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("identity", JSON_TYPE, nullable=True))
        batch.add_column(sa.Column("bare_baseline", JSON_TYPE, nullable=True))
        batch.alter_column("base_bank_id", existing_type=sa.Integer(), nullable=True)
        batch.create_index(op.f("ix_gate_runs_kind"), ["kind"], unique=False)
    with op.batch_alter_table("gate_decisions") as batch:
        batch.add_column(
            sa.Column("provisional", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    _lift_legacy_notes()
    with op.batch_alter_table("gate_runs") as batch:
        for name, (type_, _) in FILLED.items():
            batch.alter_column(name, existing_type=type_, server_default=None)
    with op.batch_alter_table("gate_decisions") as batch:
        batch.alter_column("provisional", existing_type=sa.Boolean(), server_default=None)


def _lift_legacy_notes() -> None:
    bind = op.get_bind()
    runs = sa.table(
        "gate_runs",
        sa.column("id", sa.Integer()),
        sa.column("note", sa.Text()),
        sa.column("kind", sa.String()),
        sa.column("split", sa.String()),
        sa.column("sample_id", sa.Integer()),
        sa.column("budget", sa.Integer()),
        sa.column("solver", sa.String()),
        sa.column("n_tasks", sa.Integer()),
    )
    rows = bind.execute(
        sa.select(runs.c.id, runs.c.note).where(runs.c.note.like('{"' + LEGACY_KEY + '"%'))
    ).all()
    for run_id, note in rows:
        try:
            protocol = json.loads(note.splitlines()[0])[LEGACY_KEY]
            values = {
                "kind": "gate_a" if protocol.get("gate_kind") == "gate_a" else "online",
                "split": str(protocol.get("split", "val"))[:64],
                "sample_id": int(protocol.get("sample", 0)),
                "budget": int(protocol.get("budget", 10)),
                "solver": str(protocol.get("solver", "statsmodels"))[:32],
                "n_tasks": None if protocol.get("n_tasks") is None else int(protocol["n_tasks"]),
            }
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # not a line the evaluator wrote: leave the run at the defaults
        bind.execute(sa.update(runs).where(runs.c.id == run_id).values(**values))


def downgrade() -> None:
    with op.batch_alter_table("gate_decisions") as batch:
        batch.drop_column("provisional")
    with op.batch_alter_table("gate_runs") as batch:
        batch.drop_index(op.f("ix_gate_runs_kind"))
        # Gate A runs have no base bank and 0001 cannot hold them: this fails while any exists.
        batch.alter_column("base_bank_id", existing_type=sa.Integer(), nullable=False)
        for name in ("bare_baseline", "identity", "n_tasks", *reversed(FILLED)):
            batch.drop_column(name)
