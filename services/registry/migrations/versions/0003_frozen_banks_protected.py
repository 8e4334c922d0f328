"""Frozen banks and their entries protected in the database; history safe from TRUNCATE.

Revision ID: 0003
Revises: 0002

On Postgres:
- `banks`: no DELETE; once a bank leaves draft, nothing about it changes except the one
  transition frozen -> retired (status and retired_at). `bank_entries`: no INSERT, UPDATE or
  DELETE for a bank that is not a draft. Without these an `UPDATE bank_entries SET rho = ...`
  on a frozen bank changed what the API serves under the old ETag and content hash.
- TRUNCATE is refused on the append-only tables and on banks and bank entries (row triggers do
  not fire on TRUNCATE).
These triggers bind every role, and the registry's app role (see `intraskill registry migrate
--app-role`) owns nothing, so it cannot disable them or switch them off with
`session_replication_role` either.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PROTECTED_TABLES = ("audit_log", "alias_events", "chunk_versions", "chunk_texts", "banks")
PROTECTED_TABLES += ("bank_entries",)

FROZEN_BANK_FUNCTION = """
CREATE OR REPLACE FUNCTION registry_frozen_bank() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'banks are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.status <> 'draft' AND (
        (NEW.q, NEW.round, NEW.parent_bank_id, NEW.gate_decision_id, NEW.note,
         NEW.content_hash, NEW.frozen_at, NEW.created_by, NEW.created_at)
        IS DISTINCT FROM
        (OLD.q, OLD.round, OLD.parent_bank_id, OLD.gate_decision_id, OLD.note,
         OLD.content_hash, OLD.frozen_at, OLD.created_by, OLD.created_at)
        OR ((NEW.status, NEW.retired_at) IS DISTINCT FROM (OLD.status, OLD.retired_at)
            AND NOT (OLD.status = 'frozen' AND NEW.status = 'retired'))
    ) THEN
        RAISE EXCEPTION 'bank % is %: only frozen -> retired may change it', OLD.id, OLD.status
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""

FROZEN_ENTRIES_FUNCTION = """
CREATE OR REPLACE FUNCTION registry_frozen_bank_entries() RETURNS trigger AS $$
DECLARE
    touched integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        touched := ARRAY[NEW.bank_id];
    ELSIF TG_OP = 'DELETE' THEN
        touched := ARRAY[OLD.bank_id];
    ELSE
        touched := ARRAY[OLD.bank_id, NEW.bank_id];
    END IF;
    IF EXISTS (SELECT 1 FROM banks WHERE id = ANY(touched) AND status <> 'draft') THEN
        RAISE EXCEPTION 'the entries of a frozen or retired bank never change'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FROZEN_BANK_FUNCTION)
    op.execute(FROZEN_ENTRIES_FUNCTION)
    op.execute(
        "CREATE TRIGGER banks_frozen BEFORE UPDATE OR DELETE ON banks "
        "FOR EACH ROW EXECUTE FUNCTION registry_frozen_bank()"
    )
    op.execute(
        "CREATE TRIGGER bank_entries_frozen BEFORE INSERT OR UPDATE OR DELETE ON bank_entries "
        "FOR EACH ROW EXECUTE FUNCTION registry_frozen_bank_entries()"
    )
    for table in PROTECTED_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION registry_append_only()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in PROTECTED_TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    op.execute("DROP TRIGGER IF EXISTS bank_entries_frozen ON bank_entries")
    op.execute("DROP TRIGGER IF EXISTS banks_frozen ON banks")
    op.execute("DROP FUNCTION IF EXISTS registry_frozen_bank_entries()")
    op.execute("DROP FUNCTION IF EXISTS registry_frozen_bank()")
