"""Every migration can be undone and redone: upgrade -> downgrade step by step -> upgrade again on
a scratch Postgres database (created here and dropped afterwards) gives the same schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from registry_support import ADMIN_URL
from sqlalchemy import create_engine, inspect, text

from services.registry.migrate import alembic_config, upgrade


@pytest.fixture
def scratch_url() -> Iterator[str]:
    name = f"registry_migrate_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def schema(url: str) -> dict:
    """Tables with their columns, indexes, keys and constraints, plus the triggers."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            inspector = inspect(connection)
            tables = {
                table: {
                    "columns": [
                        (c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                        for c in inspector.get_columns(table)
                    ],
                    "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
                    "indexes": sorted(
                        (i["name"], tuple(i["column_names"]), i["unique"])
                        for i in inspector.get_indexes(table)
                    ),
                    "unique": sorted(
                        (u["name"], tuple(u["column_names"]))
                        for u in inspector.get_unique_constraints(table)
                    ),
                    "foreign_keys": sorted(
                        (f["name"], tuple(f["constrained_columns"]), f["referred_table"])
                        for f in inspector.get_foreign_keys(table)
                    ),
                    "checks": sorted(
                        (c["name"], c["sqltext"]) for c in inspector.get_check_constraints(table)
                    ),
                }
                for table in inspector.get_table_names()
                if table != "alembic_version"
            }
            triggers = connection.execute(
                text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
            ).scalars()
            return {"tables": tables, "triggers": list(triggers)}
    finally:
        engine.dispose()


def test_every_migration_downgrades_and_upgrades_again(scratch_url):
    config = alembic_config(scratch_url)
    revisions = [
        script.revision
        for script in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))
    ]
    assert revisions[:2] == ["0001", "0002"]
    # The schema at each revision, reached upwards from an empty database.
    upwards = {}
    for revision in revisions:
        upgrade(scratch_url, revision)
        upwards[revision] = schema(scratch_url)
    assert upwards[revisions[-1]]["tables"] and upwards[revisions[-1]]["triggers"]
    # Down one step at a time: each step gives back the schema of the revision below it.
    for below in reversed(revisions[:-1]):
        command.downgrade(config, below)
        assert schema(scratch_url) == upwards[below], f"downgrade to {below}"
    command.downgrade(config, "base")
    assert schema(scratch_url) == {"tables": {}, "triggers": []}
    upgrade(scratch_url)
    assert schema(scratch_url) == upwards[revisions[-1]]
