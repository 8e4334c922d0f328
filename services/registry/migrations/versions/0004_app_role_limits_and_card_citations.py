"""app role limits: history append-only, settled rows final, aliases move only with history;
card citations exactly once per round

Revision ID: 0004
Revises: 0003

- `candidate_citations` (card, round) -> candidate: a failure card backs at most one candidate
  per round (issue 21). Filled from the candidates stored so far (the first citation of a card
  in a round wins if history already cites it twice).
On Postgres, triggers that bind every role (issue 22, the app role could rewrite history):
- append-only (no UPDATE or DELETE, no TRUNCATE): `chunks`, `checkpoints`, `failure_cards`,
  `card_audits`, `gate_observations`, `gate_decisions`, `gate_decision_rows`,
  `candidate_citations` (besides the tables 0001 and 0003 protect);
- settled once: a gate run changes only its status and note, and only while open; an all-wrong
  group only its retry outcome and trace, while pending; an idempotency record only its stored
  answer, while it has none; a candidate gets its chunk version once and is settled once
  (proposed -> selected | rejected, naming the decision), nothing else;
- aliases: never deleted; a move changes only the target, revision (+1), who and when, points
  at a frozen bank, and must commit with the alias_events row of its revision (checked at
  commit, so `UPDATE aliases SET bank_id = ...` alone is refused). Per-column grants for the app
  role are in `services/registry/migrate.py` (`grant_app_role`).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

APPEND_ONLY_TABLES = (
    "chunks",
    "checkpoints",
    "failure_cards",
    "card_audits",
    "gate_observations",
    "gate_decisions",
    "gate_decision_rows",
    "candidate_citations",
)

# (table, trigger function) for the rows that are settled once.
SETTLED_ONCE = {
    "gate_runs": "registry_gate_run_settles_once",
    "all_wrong_groups": "registry_retry_settles_once",
    "idempotency_records": "registry_answer_stored_once",
    "candidates": "registry_candidate_settles_once",
}

# Each function: no DELETE; apart from the named columns the row stays as it was; and the row
# must still be in its initial state. `to_jsonb(row) - 'col'` compares "everything else".
FUNCTIONS = {
    "registry_gate_run_settles_once": """
        IF (to_jsonb(NEW) - 'status' - 'note') IS DISTINCT FROM (to_jsonb(OLD) - 'status' - 'note')
           OR OLD.status <> 'open' THEN
            RAISE EXCEPTION 'gate run %: only an open run changes, and only its status and note',
                OLD.id USING ERRCODE = 'restrict_violation';
        END IF;""",
    "registry_retry_settles_once": """
        IF (to_jsonb(NEW) - 'retry_outcome' - 'retry_trace_uri')
               IS DISTINCT FROM (to_jsonb(OLD) - 'retry_outcome' - 'retry_trace_uri')
           OR OLD.retry_outcome <> 'pending' THEN
            RAISE EXCEPTION 'all-wrong group %: only a pending retry is settled, once', OLD.id
                USING ERRCODE = 'restrict_violation';
        END IF;""",
    "registry_answer_stored_once": """
        IF (to_jsonb(NEW) - 'status_code' - 'body' - 'headers')
               IS DISTINCT FROM (to_jsonb(OLD) - 'status_code' - 'body' - 'headers')
           OR OLD.status_code IS NOT NULL THEN
            RAISE EXCEPTION 'idempotency record %: its answer is stored once', OLD.key
                USING ERRCODE = 'restrict_violation';
        END IF;""",
    "registry_candidate_settles_once": """
        IF (to_jsonb(NEW) - 'chunk_version_id' - 'status' - 'decision_id')
               IS DISTINCT FROM (to_jsonb(OLD) - 'chunk_version_id' - 'status' - 'decision_id')
           OR (OLD.chunk_version_id IS NOT NULL
               AND NEW.chunk_version_id IS DISTINCT FROM OLD.chunk_version_id)
           OR ((NEW.status, NEW.decision_id) IS DISTINCT FROM (OLD.status, OLD.decision_id)
               AND (OLD.status <> 'proposed' OR NEW.decision_id IS NULL)) THEN
            RAISE EXCEPTION 'candidate %: its version is set once and it is settled once', OLD.id
                USING ERRCODE = 'restrict_violation';
        END IF;""",
}

SETTLED_TEMPLATE = """
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME
            USING ERRCODE = 'restrict_violation';
    END IF;{body}
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""

ALIAS_MOVE_FUNCTION = """
CREATE OR REPLACE FUNCTION registry_alias_move() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'aliases are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.name <> OLD.name OR NEW.protected <> OLD.protected
                             OR NEW.revision <> OLD.revision + 1) THEN
        RAISE EXCEPTION 'alias %: a move changes the target and takes the next revision',
            OLD.name USING ERRCODE = 'restrict_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM banks WHERE id = NEW.bank_id AND status = 'frozen') THEN
        RAISE EXCEPTION 'alias %: aliases point at frozen banks only', NEW.name
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""

ALIAS_HISTORY_FUNCTION = """
CREATE OR REPLACE FUNCTION registry_alias_has_history() RETURNS trigger AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM alias_events
        WHERE alias = NEW.name AND revision = NEW.revision AND to_bank_id = NEW.bank_id
    ) THEN
        RAISE EXCEPTION 'alias % revision % has no history row', NEW.name, NEW.revision
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    op.create_table(
        "candidate_citations",
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidates.id"]),
        sa.ForeignKeyConstraint(["card_id"], ["failure_cards.id"]),
        sa.PrimaryKeyConstraint("card_id", "round"),
    )
    op.create_index(
        op.f("ix_candidate_citations_candidate_id"),
        "candidate_citations",
        ["candidate_id"],
        unique=False,
    )
    _cite_stored_candidates()
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, body in FUNCTIONS.items():
        op.execute(SETTLED_TEMPLATE.format(name=name, body=body))
    for table, function in SETTLED_ONCE.items():
        op.execute(
            f"CREATE TRIGGER {table}_settled_once BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
    for table in APPEND_ONLY_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION registry_append_only()"
        )
    for table in (*APPEND_ONLY_TABLES, *SETTLED_ONCE, "aliases"):
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION registry_append_only()"
        )
    op.execute(ALIAS_MOVE_FUNCTION)
    op.execute(ALIAS_HISTORY_FUNCTION)
    op.execute(
        "CREATE TRIGGER aliases_move BEFORE INSERT OR UPDATE OR DELETE ON aliases "
        "FOR EACH ROW EXECUTE FUNCTION registry_alias_move()"
    )
    op.execute(
        "CREATE CONSTRAINT TRIGGER aliases_have_history AFTER INSERT OR UPDATE ON aliases "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION registry_alias_has_history()"
    )


def _cite_stored_candidates() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, round, source_card_ids FROM candidates ORDER BY id")
    ).all()
    cited: dict[tuple[int, int], int] = {}
    for candidate_id, round_, card_ids in rows:
        for card_id in json.loads(card_ids) if isinstance(card_ids, str) else card_ids:
            cited.setdefault((card_id, round_), candidate_id)
    if cited:
        bind.execute(
            sa.text(
                "INSERT INTO candidate_citations (card_id, round, candidate_id) "
                "VALUES (:card_id, :round, :candidate_id)"
            ),
            [
                {"card_id": card, "round": round_, "candidate_id": candidate}
                for (card, round_), candidate in cited.items()
            ],
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS aliases_have_history ON aliases")
        op.execute("DROP TRIGGER IF EXISTS aliases_move ON aliases")
        for table in (*APPEND_ONLY_TABLES, *SETTLED_ONCE, "aliases"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        for table in APPEND_ONLY_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        for table in SETTLED_ONCE:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_settled_once ON {table}")
        for function in (*FUNCTIONS, "registry_alias_move", "registry_alias_has_history"):
            op.execute(f"DROP FUNCTION IF EXISTS {function}()")
    op.drop_index(op.f("ix_candidate_citations_candidate_id"), table_name="candidate_citations")
    op.drop_table("candidate_citations")
