"""Arms are named overrides of one base config; the budget follows the reference's step times.

Expected values come from the issue's arm list and the reference's infra section (4 GPUs,
rollout 209-245 s per batch of 128 episodes); nothing is read back from the code under test."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from services.trainer.config import TrainerConfig
from shared.experiment.arms import ArmError, arm, parse_arms
from shared.experiment.budget import experiment_hours, run_hours
from shared.experiment.cli import load_plan
from shared.experiment.compare import arm_fingerprint

REPO = Path(__file__).resolve().parents[2]
BASE = tomllib.loads((REPO / "configs" / "cpu.toml").read_text())


def test_arm_names_parse_and_bad_ones_are_refused():
    arms = parse_arms("intraskill, grpo,q=0.35")
    assert [a.name for a in arms] == ["intraskill", "grpo", "q=0.35"]
    assert arms[2].q == 0.35 and arms[2].slug == "q0.35"
    for bad in ("ppo", "q=1.5", "q=abc", "grpo,grpo", ""):
        with pytest.raises(ArmError):
            parse_arms(bad)


def flat(config: dict, prefix: str = "") -> dict:
    """{"gate": {"admit": "all"}} -> {"gate.admit": "all"}."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def test_each_arm_overrides_only_what_it_names_and_loads_as_a_trainer_config():
    base = flat(TrainerConfig.from_dict(BASE).as_dict())
    expected = {  # field -> value per arm, from the issue
        "intraskill": {},
        "grpo": {"skill_loop": False},
        "fixed-s0": {"skill_loop": False},
        "no-mask": {"mask": False},
        "no-gate": {"gate.admit": "all"},
        "q=0.5": {"q": 0.5},
    }
    for name, changes in expected.items():
        effective = flat(TrainerConfig.from_dict(arm(name).config(BASE)).as_dict())
        assert {k: v for k, v in effective.items() if v != base[k]} == changes, name
    assert arm("grpo").initial_bank == "empty" and arm("fixed-s0").initial_bank == "s0"
    assert BASE.get("gate", {}).get("admit") is None  # merging never edits the base


def test_the_fingerprint_names_the_arm_not_the_seed():
    one = arm("no-mask").config(BASE) | {"seed": 1}
    two = arm("no-mask").config(BASE) | {"seed": 2}
    two["gate"] = {**two["gate"], "alias": "exp-no-mask-s1"}
    assert arm_fingerprint(one, "s0") == arm_fingerprint(two, "s0")
    assert arm_fingerprint(one, "s0") != arm_fingerprint(arm("intraskill").config(BASE), "s0")
    # grpo and fixed-s0 share a trainer config: their initial banks tell them apart
    grpo, fixed = arm("grpo").config(BASE), arm("fixed-s0").config(BASE)
    assert grpo == fixed and arm_fingerprint(grpo, "empty") != arm_fingerprint(fixed, "s0")


def test_gpu_hours_follow_the_reference_step_times():
    paper = tomllib.loads((REPO / "configs" / "paper.toml").read_text())
    ungated = run_hours(paper, gated=False)
    # 80 steps x (209 + 250 .. 245 + 500) s x 4 GPUs
    assert ungated.low == pytest.approx(80 * 459 * 4 / 3600)
    assert ungated.high == pytest.approx(80 * 745 * 4 / 3600)
    gated = run_hours(paper, gated=True)
    # + 4 gates of 400 bare + 400 masked rollouts, at 128 episodes per rollout batch
    assert gated.low - ungated.low == pytest.approx(4 * 800 / 128 * 209 * 4 / 3600)
    hours = experiment_hours(
        paper, parse_arms("intraskill,grpo"), 3, test_tasks=400, cold_start_tasks=400
    )
    assert hours["per_arm"]["grpo"] == [round(3 * ungated.low), round(3 * ungated.high)]
    assert hours["runs"] == 6


def test_the_paper_plan_names_a_base_and_every_arm():
    plan = load_plan(REPO / "configs" / "experiment-paper.toml")
    assert plan.base == REPO / "configs" / "paper.toml" and plan.seeds == 3
    assert [a.name for a in parse_arms(plan.arms)] == [
        "intraskill", "grpo", "fixed-s0", "no-mask", "no-gate", "q=0.5"
    ]  # fmt: skip
    assert load_plan(REPO / "configs" / "experiment-paper.toml", seeds=1).seeds == 1
    TrainerConfig.from_toml(plan.base)  # the base the pool runs is a valid config
