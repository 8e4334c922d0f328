"""Registry test setup: a real Postgres database per test session, migrated once by Alembic.

Each test starts from empty tables with restarted ids. Emptying rather than a rolled-back outer
transaction, because the concurrency tests drive many connections through a
live server and need committed data; it costs a few milliseconds per test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from live_server import DATABASES, LiveRegistry, serve_registry
from registry_support import ACTORS, ADMIN_URL, TOKENS, Api, serve
from sqlalchemy import text

from services.registry.app import create_app
from services.registry.banks.cache import FrozenBankCache
from services.registry.migrate import upgrade
from services.registry.settings import RegistrySettings
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import TokenGrant, hash_token
from tests.live_servers import scratch_database


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    name = f"registry_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    url = f"{base}/{name}"
    upgrade(url)
    yield url
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def settings(database_url: str) -> RegistrySettings:
    grants = [
        TokenGrant(name=ACTORS[role], role=role, token_sha256=hash_token(TOKENS[role]))
        for role in Role
    ]
    # The shipped pool and timeout defaults: the tests exercise what deployment runs.
    return RegistrySettings(database_url=database_url, tokens=grants)


@pytest.fixture(scope="session")
def app(settings: RegistrySettings):
    return create_app(settings)


@pytest.fixture(scope="session")
def _tables(app) -> list[tuple[str, bool]]:
    """(table, has a serial id) in dependency order."""
    from sqlmodel import SQLModel

    import services.registry.models  # noqa: F401

    return [
        (
            table.name,
            "id" in table.c
            and table.c["id"].autoincrement is not False
            and table.c["id"].type.python_type is int,
        )
        for table in SQLModel.metadata.sorted_tables
    ]


@pytest.fixture(autouse=True)
def clean_database(request: pytest.FixtureRequest) -> None:
    if "app" not in request.fixturenames:
        return
    app = request.getfixturevalue("app")
    tables = request.getfixturevalue("_tables")
    # DELETE with triggers off (replica role) is ~50x faster than TRUNCATE on tiny tables and
    # gets past the append-only triggers, which only a test may do.
    with app.state.engine.begin() as connection:
        connection.execute(text("SET LOCAL session_replication_role = replica"))
        for table, serial in reversed(tables):
            connection.execute(text(f"DELETE FROM {table}"))
            if serial:
                connection.execute(
                    text("SELECT setval(pg_get_serial_sequence(:table, 'id'), 1, false)"),
                    {"table": table},
                )
    app.state.bank_cache = FrozenBankCache(app.state.settings.bank_cache_size)


@pytest.fixture(scope="session")
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


@pytest.fixture(scope="session")
def live_server(app) -> Iterator[str]:
    """The registry app over real HTTP for the whole session."""
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module", params=DATABASES)
def registry(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[LiveRegistry]:
    """A real `intraskill registry serve` process per test module and database kind, for the
    live-server tests (tests share it, so they make uniquely named objects: `unique`)."""
    with (
        scratch_database(request.param, tmp_path_factory.mktemp(request.param)) as url,
        serve_registry(url) as live,
    ):
        yield live
