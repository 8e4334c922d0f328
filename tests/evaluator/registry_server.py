"""A live registry for the evaluator's integration tests: the real service in a subprocess.

It runs `intraskill registry serve` on a fresh Postgres database (REGISTRY_TEST_ADMIN_URL, as
the registry's own tests), so the evaluator talks to it only over HTTP through the shared client.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ADMIN_URL = os.environ.get("REGISTRY_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")
TOKENS = {role: f"evaluator-test-{role}-{uuid.uuid4().hex[:8]}" for role in ROLES}
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory) -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    name = f"evaluator_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        pytest.skip(f"no Postgres for the registry at {ADMIN_URL}: {error}")
    base = ADMIN_URL.rsplit("/", 1)[0]
    grants = [
        {
            "name": f"{role}-bot",
            "role": role,
            "token_sha256": hashlib.sha256(TOKENS[role].encode()).hexdigest(),
        }
        for role in ROLES
    ]
    port = _free_port()
    log = tmp_path_factory.mktemp("registry") / "registry.log"
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{name}",
        "REGISTRY_TOKENS": json.dumps(grants),
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.cli", "registry", "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"registry did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
