"""Shared fixtures: the tiny `test` preset world (built once per session) and the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.shopsim.env import ShopEnv

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "data" / "reward-cases"


def load_fixture(name: str) -> list[dict]:
    path = FIXTURES / name
    if not path.exists():  # CI lays shared/ beside the clone; a checkout may have it one up
        path = Path("/work/shared/data/reward-cases") / name
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def env() -> ShopEnv:
    return ShopEnv.from_preset("test")
