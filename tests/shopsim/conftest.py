"""Shared fixtures: the tiny `test` preset world (built once per session) and the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.runtime.shopsim.env import ShopEnv

# The reference's reward vectors, vendored under tests/fixtures/reference (see its README).
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "reward-cases"


def load_fixture(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def env() -> ShopEnv:
    return ShopEnv.from_preset("test")
