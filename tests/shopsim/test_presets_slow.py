"""Bigger presets (run with --run-slow): the oracle solves every generated task."""

from __future__ import annotations

import pytest

from shared.runtime.shopsim.agents import evaluate_agent
from shared.runtime.shopsim.env import ShopEnv


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["cpu", "paper"])
def test_oracle_solves_the_preset(preset: str) -> None:
    env = ShopEnv.from_preset(preset)
    limit = 0 if preset == "cpu" else 400
    report = evaluate_agent(env, "oracle", limit=limit)
    for split in ("train", "val", "test"):
        assert report[split]["all"]["success"] >= 0.99, (preset, split)


@pytest.mark.slow
def test_paper_preset_split_sizes() -> None:
    env = ShopEnv.from_preset("paper")
    assert [len(env.task_ids(s)) for s in ("train", "val", "test")] == [3726, 400, 400]
