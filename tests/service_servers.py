"""The evaluator and the analyst as their callers meet them: real `intraskill gate serve` and
`intraskill analyst serve` processes on loopback, on the live registry of the evaluator tests'
session fixture, admitting one grant per role (the list the registry holds too). The evaluator
and analyst tests (auth, hardening) start them here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from registry_server import GRANTS, ROLES, TOKENS

from shared.kit.auth import hash_token
from tests.live_servers import live_server

# On a loaded machine a service's start (statsmodels and torch imports) has taken over three
# minutes; a start that never comes still fails, later.
START_TIMEOUT_S = 600.0

# A second caller of each role, known to the services under test only: idempotency keys are
# the caller's own, so the same key from another caller of the same role is another request.
SECOND_TOKENS = {role: f"{TOKENS[role]}-second" for role in ROLES}
SECOND_GRANTS = [
    {"name": f"{role}-second", "role": role, "token_sha256": hash_token(SECOND_TOKENS[role])}
    for role in ROLES
]


def evaluator_env(registry_url: str, folder: Path, extra: Mapping[str, str] = {}) -> dict:
    """The evaluator's settings: procedural TEST DOUBLE backend on the `test` world."""
    return {
        "EVALUATOR_REGISTRY_URL": registry_url,
        "EVALUATOR_REGISTRY_TOKEN": TOKENS["evaluator"],
        "EVALUATOR_TOKENS": json.dumps(GRANTS + SECOND_GRANTS),
        "EVALUATOR_JOBS_DIR": str(folder / "jobs"),
        "EVALUATOR_BACKEND": "procedural",
        "EVALUATOR_ENV_PRESET": "test",
        **extra,
    }


def evaluator_serving(registry_url: str, folder: Path, extra: Mapping[str, str] = {}):
    env = evaluator_env(registry_url, folder, extra)
    return live_server(["gate", "serve"], env, folder / "evaluator.log", timeout=START_TIMEOUT_S)


def analyst_env(registry_url: str, folder: Path, extra: Mapping[str, str] = {}) -> dict:
    return {
        "ANALYST_REGISTRY_URL": registry_url,
        "ANALYST_REGISTRY_TOKEN": TOKENS["analyst"],
        "ANALYST_TOKENS": json.dumps(GRANTS + SECOND_GRANTS),
        "ANALYST_DATA_DIR": str(folder / "data"),
        **extra,
    }


def analyst_serving(registry_url: str, folder: Path, extra: Mapping[str, str] = {}):
    env = analyst_env(registry_url, folder, extra)
    return live_server(["analyst", "serve"], env, folder / "analyst.log", timeout=START_TIMEOUT_S)


def bearer(role: str, *, second: bool = False) -> dict[str, str]:
    """The Authorization header of `role`'s caller (or of its second caller)."""
    return {"Authorization": f"Bearer {(SECOND_TOKENS if second else TOKENS)[role]}"}


class FrozenRegistry:
    """A TEST DOUBLE of a registry that hangs: it accepts connections (the kernel's backlog)
    and never answers, as a registry stopped with SIGSTOP would."""

    def __init__(self) -> None:
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(4096)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def close(self) -> None:
        self._socket.close()
