"""Property-based run over the OpenAPI document against a live registry: whatever the input and
whoever asks, never a 5xx, and answers look as documented.

The server is `intraskill registry serve`, started as a subprocess on a free port over a scratch
Postgres database, seeded with one of everything by the write catalog (every write succeeds
over real HTTP first). Each generated request is sent once per role, then once more against the
seeded rows, so generated bodies meet real objects too. `--run-slow` adds a nightly-sized run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from registry_support import ACTORS, ADMIN_URL, TOKENS, Api, free_port, headers
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)
from write_catalog import WriteWalk

from services.registry.app import create_app
from services.registry.migrate import upgrade
from services.registry.settings import RegistrySettings, hash_token
from shared.registry_api.schemas import Role

CHECKS = [not_a_server_error, content_type_conformance, response_schema_conformance]
# What the seeding walk leaves behind: path parameters that hit real rows.
SEEDED = {"name": "current", "checkpoint_id": "ckpt-r0"}


@pytest.fixture(scope="module")
def scratch_database() -> Iterator[str]:
    name = f"registry_live_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        url = f"{base}/{name}"
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def live_registry(scratch_database: str, tmp_path_factory) -> Iterator[str]:
    """`intraskill registry serve` in a subprocess, seeded; yields its base URL."""
    grants = [
        {"name": ACTORS[role], "role": role.value, "token_sha256": hash_token(TOKENS[role])}
        for role in Role
    ]
    env = {
        **os.environ,
        "DATABASE_URL": scratch_database,
        "REGISTRY_TOKENS": json.dumps(grants),
    }
    port = free_port()
    log = tmp_path_factory.mktemp("registry") / "serve.log"
    command = [
        str(Path(sys.executable).parent / "intraskill"),
        "registry", "serve", "--host", "127.0.0.1", "--port", str(port), "--no-migrate",
    ]  # fmt: skip
    with open(log, "w") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        with httpx.Client(base_url=url, timeout=30) as http:
            walk = WriteWalk(Api(http))
            for write, request in walk:
                walk.send(write, request)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"registry exited:\n{log.read_text()}"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"registry did not come up:\n{log.read_text()}")


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
