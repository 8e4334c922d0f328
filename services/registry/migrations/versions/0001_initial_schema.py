"""initial schema: chunks, banks, aliases, gates, cards, evidence, audit, idempotency

Revision ID: 0001
Revises:
Create Date: 2026-11-29 13:59:54.276825
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APPEND_ONLY_TABLES = ("audit_log", "alias_events", "chunk_versions", "chunk_texts")
APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION registry_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("object_type", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("object_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column(
            "before",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "after",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_audit_log_action"), "audit_log", ["action"], unique=False)
    op.create_index(op.f("ix_audit_log_actor"), "audit_log", ["actor"], unique=False)
    op.create_index("ix_audit_log_object", "audit_log", ["object_type", "object_id"], unique=False)
    op.create_table(
        "banks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("q", sa.Float(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("parent_bank_id", sa.Integer(), nullable=True),
        sa.Column("gate_decision_id", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("frozen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status = 'draft' OR content_hash IS NOT NULL", name="ck_banks_hash"),
        sa.CheckConstraint("status IN ('draft', 'frozen', 'retired')", name="ck_banks_status"),
        sa.ForeignKeyConstraint(
            ["parent_bank_id"],
            ["banks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_banks_round"), "banks", ["round"], unique=False)
    op.create_index(op.f("ix_banks_status"), "banks", ["status"], unique=False)
    op.create_table(
        "checkpoints",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_checkpoints_round"), "checkpoints", ["round"], unique=False)
    op.create_table(
        "chunk_texts",
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column(
            "content",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("content_hash"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_chunks_slug"), "chunks", ["slug"], unique=True)
    op.create_table(
        "idempotency_records",
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("method", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("path", sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column("request_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column(
            "headers",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("actor", "key"),
    )
    op.create_table(
        "aliases",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("protected", sa.Boolean(), nullable=False),
        sa.Column("updated_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bank_id"],
            ["banks.id"],
        ),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "all_wrong_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("group_index", sa.Integer(), nullable=False),
        sa.Column(
            "treatment",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("checkpoint_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("retry_outcome", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("retry_trace_uri", sa.Text(), nullable=True),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bank_id"],
            ["banks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["checkpoint_id"],
            ["checkpoints.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_all_wrong_groups_retry_outcome"),
        "all_wrong_groups",
        ["retry_outcome"],
        unique=False,
    )
    op.create_index(op.f("ix_all_wrong_groups_round"), "all_wrong_groups", ["round"], unique=False)
    op.create_index(
        op.f("ix_all_wrong_groups_task_id"), "all_wrong_groups", ["task_id"], unique=False
    )
    op.create_table(
        "chunk_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column(
            "provenance",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("author", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["content_hash"],
            ["chunk_texts.content_hash"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("chunk_id", "version", name="uq_chunk_versions_number"),
    )
    op.create_index(
        op.f("ix_chunk_versions_chunk_id"), "chunk_versions", ["chunk_id"], unique=False
    )
    op.create_index(
        op.f("ix_chunk_versions_content_hash"), "chunk_versions", ["content_hash"], unique=False
    )
    op.create_table(
        "gate_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("checkpoint_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("base_bank_id", sa.Integer(), nullable=False),
        sa.Column(
            "candidate_pool",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("mask_seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["base_bank_id"],
            ["banks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["checkpoint_id"],
            ["checkpoints.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_gate_runs_round"), "gate_runs", ["round"], unique=False)
    op.create_index(op.f("ix_gate_runs_status"), "gate_runs", ["status"], unique=False)
    op.create_table(
        "bank_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("chunk_version_id", sa.Integer(), nullable=False),
        sa.Column("rho", sa.Float(), nullable=False),
        sa.Column("coefficient", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["bank_id"],
            ["banks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["chunk_version_id"],
            ["chunk_versions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("bank_id", "chunk_id", name="uq_bank_entries_chunk"),
        sa.UniqueConstraint("bank_id", "position", name="uq_bank_entries_position"),
    )
    op.create_index(op.f("ix_bank_entries_bank_id"), "bank_entries", ["bank_id"], unique=False)
    op.create_table(
        "failure_cards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("checkpoint_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("evidence_id", sa.Integer(), nullable=True),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("eligible", sa.Boolean(), nullable=False),
        sa.Column("target_chunk_id", sa.Integer(), nullable=True),
        sa.Column(
            "deployable",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "firewall_findings",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("forced_no_proposal_reason", sa.Text(), nullable=True),
        sa.Column(
            "extras",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["checkpoint_id"],
            ["checkpoints.id"],
        ),
        sa.ForeignKeyConstraint(
            ["evidence_id"],
            ["all_wrong_groups.id"],
        ),
        sa.ForeignKeyConstraint(
            ["target_chunk_id"],
            ["chunks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_failure_cards_eligible"), "failure_cards", ["eligible"], unique=False)
    op.create_index(op.f("ix_failure_cards_outcome"), "failure_cards", ["outcome"], unique=False)
    op.create_index(op.f("ix_failure_cards_round"), "failure_cards", ["round"], unique=False)
    op.create_index(op.f("ix_failure_cards_task_id"), "failure_cards", ["task_id"], unique=False)
    op.create_table(
        "gate_decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gate_run_id", sa.Integer(), nullable=False),
        sa.Column("estimator", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column(
            "primary_component", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False
        ),
        sa.Column("n_observations", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["gate_run_id"],
            ["gate_runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("gate_run_id"),
    )
    op.create_table(
        "gate_observations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gate_run_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("sample_id", sa.Integer(), nullable=False),
        sa.Column(
            "inclusion",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "slot_states",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "bare",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "masked",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["gate_run_id"],
            ["gate_runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "gate_run_id", "task_id", "sample_id", name="uq_gate_observations_task"
        ),
    )
    op.create_index(
        op.f("ix_gate_observations_gate_run_id"), "gate_observations", ["gate_run_id"], unique=False
    )
    op.create_table(
        "alias_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("alias", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("from_bank_id", sa.Integer(), nullable=True),
        sa.Column("to_bank_id", sa.Integer(), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("gate_decision_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["alias"],
            ["aliases.name"],
        ),
        sa.ForeignKeyConstraint(
            ["from_bank_id"],
            ["banks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["gate_decision_id"],
            ["gate_decisions.id"],
        ),
        sa.ForeignKeyConstraint(
            ["to_bank_id"],
            ["banks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("alias", "revision", name="uq_alias_events_revision"),
    )
    op.create_index(op.f("ix_alias_events_alias"), "alias_events", ["alias"], unique=False)
    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("operation", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("target_chunk_id", sa.Integer(), nullable=True),
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("chunk_version_id", sa.Integer(), nullable=True),
        sa.Column("signature", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column(
            "source_card_ids",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("failure_mechanism", sa.Text(), nullable=True),
        sa.Column(
            "proposal_checkpoint", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True
        ),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=True),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
        ),
        sa.ForeignKeyConstraint(
            ["chunk_version_id"],
            ["chunk_versions.id"],
        ),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["gate_decisions.id"],
        ),
        sa.ForeignKeyConstraint(
            ["target_chunk_id"],
            ["chunks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("signature"),
    )
    op.create_index(op.f("ix_candidates_round"), "candidates", ["round"], unique=False)
    op.create_index(op.f("ix_candidates_status"), "candidates", ["status"], unique=False)
    op.create_table(
        "card_audits",
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column(
            "privileged_audit",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["card_id"],
            ["failure_cards.id"],
        ),
        sa.PrimaryKeyConstraint("card_id"),
    )
    op.create_table(
        "gate_decision_rows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=False),
        sa.Column("chunk_version_id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column(
            "coefficients",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column(
            "hc3_se",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "ci_low",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "ci_high",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["chunk_version_id"],
            ["chunk_versions.id"],
        ),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["gate_decisions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "decision_id", "chunk_version_id", name="uq_gate_decision_rows_version"
        ),
    )
    op.create_index(
        op.f("ix_gate_decision_rows_decision_id"),
        "gate_decision_rows",
        ["decision_id"],
        unique=False,
    )

    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        # banks <-> gate_runs refer to each other, so this FK can only come after both exist
        # (SQLite cannot add one later; the service checks the reference there).
        op.create_foreign_key(
            "fk_banks_gate_decision", "banks", "gate_decisions", ["gate_decision_id"], ["id"]
        )
        # History is append-only: refuse UPDATE and DELETE in the database itself.
        op.execute(APPEND_ONLY_FUNCTION)
        for table in APPEND_ONLY_TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION registry_append_only()"
            )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in APPEND_ONLY_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute("DROP FUNCTION IF EXISTS registry_append_only()")
        op.drop_constraint("fk_banks_gate_decision", "banks", type_="foreignkey")
    op.drop_index(op.f("ix_gate_decision_rows_decision_id"), table_name="gate_decision_rows")
    op.drop_table("gate_decision_rows")
    op.drop_table("card_audits")
    op.drop_index(op.f("ix_candidates_status"), table_name="candidates")
    op.drop_index(op.f("ix_candidates_round"), table_name="candidates")
    op.drop_table("candidates")
    op.drop_index(op.f("ix_alias_events_alias"), table_name="alias_events")
    op.drop_table("alias_events")
    op.drop_index(op.f("ix_gate_observations_gate_run_id"), table_name="gate_observations")
    op.drop_table("gate_observations")
    op.drop_table("gate_decisions")
    op.drop_index(op.f("ix_failure_cards_task_id"), table_name="failure_cards")
    op.drop_index(op.f("ix_failure_cards_round"), table_name="failure_cards")
    op.drop_index(op.f("ix_failure_cards_outcome"), table_name="failure_cards")
    op.drop_index(op.f("ix_failure_cards_eligible"), table_name="failure_cards")
    op.drop_table("failure_cards")
    op.drop_index(op.f("ix_bank_entries_bank_id"), table_name="bank_entries")
    op.drop_table("bank_entries")
    op.drop_index(op.f("ix_gate_runs_status"), table_name="gate_runs")
    op.drop_index(op.f("ix_gate_runs_round"), table_name="gate_runs")
    op.drop_table("gate_runs")
    op.drop_index(op.f("ix_chunk_versions_content_hash"), table_name="chunk_versions")
    op.drop_index(op.f("ix_chunk_versions_chunk_id"), table_name="chunk_versions")
    op.drop_table("chunk_versions")
    op.drop_index(op.f("ix_all_wrong_groups_task_id"), table_name="all_wrong_groups")
    op.drop_index(op.f("ix_all_wrong_groups_round"), table_name="all_wrong_groups")
    op.drop_index(op.f("ix_all_wrong_groups_retry_outcome"), table_name="all_wrong_groups")
    op.drop_table("all_wrong_groups")
    op.drop_table("aliases")
    op.drop_table("idempotency_records")
    op.drop_index(op.f("ix_chunks_slug"), table_name="chunks")
    op.drop_table("chunks")
    op.drop_table("chunk_texts")
    op.drop_index(op.f("ix_checkpoints_round"), table_name="checkpoints")
    op.drop_table("checkpoints")
    op.drop_index(op.f("ix_banks_status"), table_name="banks")
    op.drop_index(op.f("ix_banks_round"), table_name="banks")
    op.drop_table("banks")
    op.drop_index("ix_audit_log_object", table_name="audit_log")
    op.drop_index(op.f("ix_audit_log_actor"), table_name="audit_log")
    op.drop_index(op.f("ix_audit_log_action"), table_name="audit_log")
    op.drop_table("audit_log")
