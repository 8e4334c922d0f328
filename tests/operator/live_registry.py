"""A real `intraskill registry serve` subprocess on loopback, on SQLite or a scratch Postgres DB.

Started through the demo's own process helpers, so these tests also exercise how the demo
launches and stops the registry.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.demo.processes import mint_tokens, start_registry

ADMIN_URL = os.environ.get("REGISTRY_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class LiveRegistry:
    url: str
    tokens: dict[str, str]
    database: str


@contextmanager
def scratch_database(backend: str, folder: Path) -> Iterator[str]:
    """A SQLAlchemy URL for an empty database: a SQLite file, or a Postgres DB dropped after."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'registry.sqlite'}"
        return
    psycopg = pytest.importorskip("psycopg")
    name = f"operator_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        pytest.skip(f"no Postgres at {ADMIN_URL}: {error}")
    try:
        yield f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def live_registry(backend: str, folder: Path) -> Iterator[LiveRegistry]:
    tokens, grants = mint_tokens("optest")
    with scratch_database(backend, folder) as database:
        service = start_registry(database_url=database, grants=grants, log=folder / "reg.log")
        try:
            service.wait_ready(timeout=90)
            yield LiveRegistry(url=service.url, tokens=tokens, database=database)
        finally:
            service.stop()
