"""Run the registry's Alembic migrations from code (CLI, app start, tests)."""

from __future__ import annotations

import re

from alembic import command
from alembic.config import Config

from services.registry.db import ensure_sqlite_directory

SCRIPT_LOCATION = "services.registry:migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    # '%' is interpolation syntax in Alembic's config parser.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database at `database_url` to `revision`."""
    ensure_sqlite_directory(database_url)
    command.upgrade(alembic_config(database_url), revision)


# The columns the registry itself updates, per table; the app role may update nothing else.
# Triggers (migrations 0003, 0004) then say when: a draft bank, an open gate, a pending retry,
# an answer not stored yet, a proposed candidate, an alias move that has its history row.
APP_ROLE_UPDATES = {
    "banks": (
        "q", "round", "parent_bank_id", "gate_decision_id", "note",
        "status", "content_hash", "frozen_at", "retired_at",
    ),
    "aliases": ("bank_id", "revision", "updated_by", "updated_at"),
    "gate_runs": ("status", "note"),
    "all_wrong_groups": ("retry_outcome", "retry_trace_uri"),
    "idempotency_records": ("status_code", "body", "headers"),
    "candidates": ("chunk_version_id", "status", "decision_id"),
}  # fmt: skip


def app_role_grants(role: str) -> list[str]:
    """The statements that give `role` exactly what the registry does: read everything,
    append to every table, update the columns above, delete a draft's entries."""
    statements = [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {role}",
        f"REVOKE INSERT ON alembic_version FROM {role}",
        f"GRANT DELETE ON bank_entries TO {role}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
    ]
    for table, columns in APP_ROLE_UPDATES.items():
        statements.append(f"GRANT UPDATE ({', '.join(columns)}) ON {table} TO {role}")
    return statements


def grant_app_role(database_url: str, role: str) -> None:
    """Let an existing Postgres role run the registry without owning anything.

    Run as the schema's owner after `upgrade` (again after each upgrade: it resets the role's
    table grants). The app role may read and append, update only the columns the registry
    updates (`APP_ROLE_UPDATES`) and delete only a draft's entries; it owns no table, so it
    cannot TRUNCATE, drop or disable the triggers that keep history append-only; nor can it
    set `session_replication_role` (superusers only).
    """
    from sqlalchemy import create_engine, text

    if not database_url.startswith("postgresql"):
        raise ValueError("an app role is a Postgres feature; SQLite has no roles")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", role):
        raise ValueError(f"{role!r} is not a plain lower-case role name")
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            for statement in app_role_grants(role):
                connection.execute(text(statement))
    finally:
        engine.dispose()
