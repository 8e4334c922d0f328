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


def grant_app_role(database_url: str, role: str) -> None:
    """Let an existing Postgres role run the registry without owning anything.

    Run as the schema's owner after `upgrade`. The app role may read and append (and edit
    drafts, the one DELETE the service issues being a draft's entries), but owns no table, so
    it cannot TRUNCATE, drop or disable the triggers that keep history append-only; nor can it
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
            for statement in (
                f"GRANT USAGE ON SCHEMA public TO {role}",
                f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}",
                f"REVOKE INSERT, UPDATE ON alembic_version FROM {role}",
                f"GRANT DELETE ON bank_entries TO {role}",
                f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
            ):
                connection.execute(text(statement))
    finally:
        engine.dispose()
