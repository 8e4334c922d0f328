"""A live registry for the evaluator's integration tests: the real service in a subprocess.

It runs `intraskill registry serve` on a fresh Postgres database (REGISTRY_TEST_ADMIN_URL, as
the registry's own tests), so the evaluator talks to it only over HTTP through the shared client.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator

import pytest

from tests.live_servers import live_server, scratch_postgres_database

ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")
TOKENS = {role: f"evaluator-test-{role}-{uuid.uuid4().hex[:8]}" for role in ROLES}
# One grant per role: the registry admits them, and so do the evaluator and analyst under test
# (as in deploy/, one grant list for every service).
GRANTS = [
    {
        "name": f"{role}-bot",
        "role": role,
        "token_sha256": hashlib.sha256(TOKENS[role].encode()).hexdigest(),
    }
    for role in ROLES
]


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("registry") / "registry.log"
    with scratch_postgres_database(prefix="evaluator_test") as database_url:
        env = {"DATABASE_URL": database_url, "REGISTRY_TOKENS": json.dumps(GRANTS)}
        # a loaded machine has taken minutes to start a service
        with live_server(["registry", "serve", "--allow-owner"], env, log, timeout=600) as url:
            yield url
