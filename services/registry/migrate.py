"""Run the registry's Alembic migrations from code (CLI, app start, tests)."""

from __future__ import annotations

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
