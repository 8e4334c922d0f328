"""Arms are named overrides of one base config; the budget follows the reference's step times.

Expected values come from the issue's arm list and the reference's write-up (4 GPUs, rollout
209-245 s per batch of 32 x 8 = 256 generated episodes, updates up to 500 s per step, 254
all-wrong groups and 235 cards over 4 rounds, +32.50 pp with 148 of 400 tasks flipped between
two checkpoints); nothing is read back from the code under test."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from services.trainer.config import TrainerConfig
from shared.apps.experiment import cli
from shared.apps.experiment.arms import ArmError, arm, parse_arms
from shared.apps.experiment.budget import experiment_hours, run_hours
from shared.apps.experiment.cli import load_plan
from shared.apps.experiment.compare import arm_fingerprint

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
    gpu_h = 4 / 3600  # 4 GPUs, seconds to hours
    grpo = run_hours(paper, gated=False, slow_loop=False)
    # 80 steps, each one rollout batch (209..245 s) and its updates (250..500 s)
    assert grpo["rollouts"].low == pytest.approx(80 * 209 * gpu_h)
    assert grpo["updates"].high == pytest.approx(80 * 500 * gpu_h)
    assert grpo["gates"].high == grpo["slow_loop"].high == 0
    method = run_hours(paper, gated=True, slow_loop=True)
    # 4 gates of 400 bare + 400 masked rollouts, served at 256 episodes per rollout batch
    assert method["gates"].low == pytest.approx(4 * 800 / 256 * 209 * gpu_h)
    # one retry per all-wrong group and 2 verification episodes per card, same rate
    assert method["slow_loop"].high == pytest.approx((254 + 2 * 235) / 256 * 245 * gpu_h)
    hours = experiment_hours(
        paper, parse_arms("intraskill,grpo"), 3, test_tasks=400, cold_start_tasks=400
    )
    grpo_total = 3 * (80 * (209 + 250) * gpu_h)
    assert hours["per_arm"]["grpo"]["total"][0] == round(grpo_total)
    assert hours["runs"] == 6 and hours["test_conditions"] == 2 + 3 * 6
    assert hours["test"][0] == pytest.approx(400 * 20 / 256 * 209 * gpu_h, abs=0.05)


def test_the_design_states_its_mde_from_the_references_paired_variance():
    paper = tomllib.loads((REPO / "configs" / "paper.toml").read_text())
    hours = experiment_hours(
        paper, parse_arms("intraskill,grpo,fixed-s0"), 3, test_tasks=400, cold_start_tasks=400
    )
    sd = (148 / 400 - 0.325**2) ** 0.5  # the reference's Iter80 - Base paired SD
    # z_0.975 = 1.95996, z_0.80 = 0.84162; 4 contrasts: the first Holm step at 0.05 / 4
    assert hours["power"]["mde"]["r_success"] == pytest.approx(2.80158 * sd / 20, abs=1e-3)
    assert hours["power"]["mde_holm_first_step"]["r_success"] == pytest.approx(
        (2.49771 + 0.84162) * sd / 20, abs=1e-3
    )
    assert hours["inputs"]["rollout_s"]["source"].startswith("reference")
    assert "before seed variance" in hours["power"]["basis"]
    small = experiment_hours(
        paper, parse_arms("intraskill,grpo"), 1, test_tasks=40, cold_start_tasks=32
    )
    assert small["power"]["mde"]["r_success"] == pytest.approx(2.80158 * sd / 40**0.5, abs=1e-3)


def test_estimate_prints_the_mde_and_the_gpu_hours(capsys):
    assert cli.main(["estimate", "--config", str(REPO / "configs" / "experiment-paper.toml")]) == 0
    captured = capsys.readouterr()
    assert "GPU-hours" in captured.err and "MDE on test success 7.2 pp" in captured.err
    assert json.loads(captured.out)["power"]["mde"]["r_success"] == pytest.approx(0.072, abs=1e-3)


def test_the_help_shows_the_experiment_table_name():
    runner = CliRunner()
    result = runner.invoke(cli.app, ["run", "--help"], env={"COLUMNS": "200"})
    assert "([experiment] with base" in result.output


def test_the_paper_plan_names_a_base_and_every_arm():
    plan = load_plan(REPO / "configs" / "experiment-paper.toml")
    assert plan.base == REPO / "configs" / "paper.toml" and plan.seeds == 3
    assert [a.name for a in parse_arms(plan.arms)] == [
        "intraskill", "grpo", "fixed-s0", "no-mask", "no-gate", "q=0.5"
    ]  # fmt: skip
    assert load_plan(REPO / "configs" / "experiment-paper.toml", seeds=1).seeds == 1
    TrainerConfig.from_toml(plan.base)  # the base the pool runs is a valid config


def test_the_evidence_plan_skips_only_the_warm_starts_own_evaluation():
    plan = load_plan(REPO / "configs" / "cpu-evidence.toml")
    assert plan.warm_start_eval_tasks == 0
    assert load_plan(REPO / "configs" / "experiment-paper.toml").warm_start_eval_tasks is None


def test_the_hint_reading_evidence_plan_differs_from_its_control_only_where_it_says():
    """The hint-reading run is read beside the plain run as its control: the same preset, arm,
    seeds, rounds and tasks; the warm start's hint share and the test's samples alone differ."""
    control = load_plan(REPO / "configs" / "cpu-evidence.toml")
    hints = load_plan(REPO / "configs" / "cpu-evidence-hints.toml")
    differs = {key for key in vars(control) if getattr(control, key) != getattr(hints, key)}
    assert differs == {"warm_start_reading_hints", "test_samples"}
    assert (control.warm_start_reading_hints, hints.warm_start_reading_hints) == (None, 0.5)
    assert (control.test_samples, hints.test_samples) == (1, 2)


@pytest.mark.parametrize("bad", [0, 1.5, "2"])
def test_test_samples_must_be_a_whole_number_of_at_least_one(tmp_path, bad):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[experiment]\nbase = "x.toml"\ntest_samples = {bad!r}\n'.replace("'", '"'))
    with pytest.raises(typer.BadParameter, match="test_samples"):
        load_plan(plan)
