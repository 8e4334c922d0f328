"""The evaluator and the analyst as their callers meet them: real `intraskill gate serve` and
`intraskill analyst serve` processes on loopback, on the live registry of the evaluator tests'
session fixture, admitting one grant per role (the list the registry holds too). The evaluator
and analyst tests (auth, hardening) start them here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from registry_server import GRANTS, TOKENS

from tests.live_servers import live_server


def evaluator_env(registry_url: str, folder: Path, extra: Mapping[str, str] = {}) -> dict:
    """The evaluator's settings: procedural TEST DOUBLE backend on the `test` world."""
    return {
        "EVALUATOR_REGISTRY_URL": registry_url,
        "EVALUATOR_REGISTRY_TOKEN": TOKENS["evaluator"],
        "EVALUATOR_TOKENS": json.dumps(GRANTS),
        "EVALUATOR_JOBS_DIR": str(folder / "jobs"),
        "EVALUATOR_BACKEND": "procedural",
        "EVALUATOR_ENV_PRESET": "test",
        **extra,
    }


def evaluator_serving(registry_url: str, folder: Path, extra: Mapping[str, str] = {}):
    env = evaluator_env(registry_url, folder, extra)
    return live_server(["gate", "serve"], env, folder / "evaluator.log")


def analyst_env(registry_url: str, folder: Path, extra: Mapping[str, str] = {}) -> dict:
    return {
        "ANALYST_REGISTRY_URL": registry_url,
        "ANALYST_REGISTRY_TOKEN": TOKENS["analyst"],
        "ANALYST_TOKENS": json.dumps(GRANTS),
        "ANALYST_DATA_DIR": str(folder / "data"),
        **extra,
    }


def analyst_serving(registry_url: str, folder: Path, extra: Mapping[str, str] = {}):
    env = analyst_env(registry_url, folder, extra)
    return live_server(["analyst", "serve"], env, folder / "analyst.log")


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}
