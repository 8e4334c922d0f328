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
        # Postgres < 15 lets every role create objects in `public`; nobody but its owner may.
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
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


def wait_until_database_answers(
    database_url: str, within_s: float, *, say=print, poll_s: float = 2.0
) -> None:
    """Return once the database accepts a connection; RuntimeError after `within_s` seconds.

    On a fresh cluster the migrate Job starts with the database, which takes a while to accept
    connections; waiting here keeps a slow start from spending the Job's retries."""
    import time

    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    engine = create_engine(database_url, pool_pre_ping=False)
    deadline = time.monotonic() + within_s
    said_at = float("-inf")
    try:
        while True:
            try:
                with engine.connect() as connection:
                    connection.execute(text("SELECT 1"))
                return
            except OperationalError as error:
                now = time.monotonic()
                reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
                if now >= deadline:
                    raise RuntimeError(
                        f"the database did not accept a connection in {within_s:.0f} s: {reason}"
                    ) from None
                if now - said_at >= 30:
                    say(f"waiting for the database ({reason}); {deadline - now:.0f} s left")
                    said_at = now
                time.sleep(poll_s)
    finally:
        engine.dispose()
