"""Property-based run over the OpenAPI document against a live registry: whatever the input and
whoever asks, never a 5xx, and answers look as documented.

The server is `intraskill registry serve`, started as a subprocess on a free port over a scratch
Postgres database, seeded with one of everything by the write catalog (every write succeeds
over real HTTP first). Each generated request is sent once per role, then once more against the
seeded rows, so generated bodies meet real objects too. `--run-slow` adds a nightly-sized run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from registry_support import ACTORS, TOKENS, Api, headers
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)
from write_catalog import WriteWalk

from services.registry.app import create_app
from services.registry.migrate import upgrade
from services.registry.settings import RegistrySettings
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import hash_token
from tests.live_servers import live_server, scratch_postgres_database

CHECKS = [not_a_server_error, content_type_conformance, response_schema_conformance]
# What the seeding walk leaves behind: path parameters that hit real rows.
SEEDED = {"name": "current", "checkpoint_id": "ckpt-r0"}


@pytest.fixture(scope="module")
def scratch_database() -> Iterator[str]:
    with scratch_postgres_database(prefix="registry_live") as url:
        url = url.replace("postgresql://", "postgresql+psycopg://", 1)
        upgrade(url)
        yield url


@pytest.fixture(scope="module")
def live_registry(scratch_database: str, tmp_path_factory) -> Iterator[str]:
    """`intraskill registry serve` in a subprocess, seeded; yields its base URL."""
    grants = [
        {"name": ACTORS[role], "role": role.value, "token_sha256": hash_token(TOKENS[role])}
        for role in Role
    ]
    env = {"DATABASE_URL": scratch_database, "REGISTRY_TOKENS": json.dumps(grants)}
    log = tmp_path_factory.mktemp("registry") / "serve.log"
    serve = ["registry", "serve", "--no-migrate", "--allow-owner"]  # a scratch db, as its owner
    with live_server(serve, env, log, timeout=60) as url:
        with httpx.Client(base_url=url, timeout=30) as http:
            walk = WriteWalk(Api(http))
            for write, request in walk:
                walk.send(write, request)
        yield url


@pytest.fixture(scope="module")
def registry_schema(live_registry: str):
    return schemathesis.openapi.from_url(f"{live_registry}/openapi.json")


def _operations() -> list[tuple[str, str]]:
    document = create_app(RegistrySettings(database_url="sqlite://")).openapi()
    return [(method, path) for path, item in document["paths"].items() for method in item]


OPERATIONS = _operations()


# schemathesis' own pytest plugin does not run under this pytest; hypothesis drives it instead,
# one test per operation so a failure names the endpoint.
@pytest.mark.parametrize(
    "examples", [3, pytest.param(100, marks=pytest.mark.slow)], ids=["quick", "nightly"]
)
@pytest.mark.parametrize(
    ("method", "path"), OPERATIONS, ids=[f"{m.upper()} {p}" for m, p in OPERATIONS]
)
def test_no_server_errors_for_any_role(registry_schema, method, path, examples):
    operation = registry_schema[path][method]
    statuses: list[int] = []

    @given(case=operation.as_strategy())
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case):
        for role in Role:
            response = case.call(headers=headers(role))
            statuses.append(response.status_code)
            case.validate_response(response, checks=CHECKS)
        if case.path_parameters:
            case.path_parameters = {name: SEEDED.get(name, 1) for name in case.path_parameters}
            response = case.call(headers=headers(Role.operator))
            statuses.append(response.status_code)
            case.validate_response(response, checks=CHECKS)

    check()
    assert statuses, "no case was generated"
