"""GPU-hours an experiment needs and the smallest difference it can detect, before it runs.

Every figure comes from a named input with its source (`INPUTS`): the reference's logs
(/reference: its write-up, summarised in docs/experiments.md) or an assumption said to be one.
Our own trainer has not run at this scale (docs/trainer.md), so the hours assume the
reference's throughput. Rollouts are costed by episodes at the reference's serving rate (a
rollout batch of 32 groups x 8 = 256 generated episodes in 209-245 s on 4 GPUs), updates by
admitted episodes, and the slow loop's retries and counterfactual verifications as episodes at
the same rate. The analyst's LLM calls are an API, not the pool, and are left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shared.apps.experiment import stats


@dataclass(frozen=True)
class Input:
    """One named input of the estimate: its range (low, high), unit and where it comes from."""

    low: float
    high: float
    unit: str
    source: str


REFERENCE = "reference write-up (4 x A800-SXM 80 GB, Qwen3.5-4B, 4 rounds x 20 steps)"
INPUTS = {
    "gpus": Input(4, 4, "GPUs", f"{REFERENCE}, infra: colocated rollout and update"),
    "rollout_s": Input(
        209, 245, "s per rollout batch", f"{REFERENCE}: 'rollout 209-245 s per batch'"
    ),
    "episodes_per_batch": Input(
        256,
        256,
        "episodes generated per rollout batch",
        f"{REFERENCE}: 32 groups submitted x G = 8 (16 groups kept: 128 admitted)",
    ),
    "update_s": Input(
        250,
        500,
        "s per rollout step (2 optimizer updates on 128 episodes)",
        f"{REFERENCE}: 'train time exceeds 500 s on long-sample steps' (the high end); the low "
        "end, 250 s, is an assumption: no shorter update time is logged",
    ),
    "admitted_per_batch": Input(128, 128, "episodes per update batch", f"{REFERENCE}: 16 x 8"),
    "all_wrong_groups": Input(
        254,
        254,
        "full-skill retries per run (one episode each)",
        f"{REFERENCE}, analysis per round: 104 + 57 + 54 + 39 all-wrong groups",
    ),
    "cards": Input(
        235,
        235,
        "cards per run (failed retries)",
        f"{REFERENCE}, analysis per round: 87 + 56 + 53 + 39 failed retries = cards",
    ),
    "verification_episodes_per_card": Input(
        2,
        2,
        "episodes",
        "our paired verification: 1 counterfactual trial with the repair and 1 without "
        "(analyst counterfactual_trials = 1), each costed as a whole episode (an upper bound)",
    ),
    "paired_sd": Input(
        0.514,
        0.514,
        "SD of a per-task success difference between two checkpoints",
        f"{REFERENCE}, test: Iter80 free - Base free +32.50 pp with 139 + 9 of 400 tasks "
        "flipped: variance 148/400 - 0.325^2 = 0.264 (two different checkpoints, as two arms)",
    ),
    "seed_sd": Input(
        0,
        0,
        "SD of an arm's test success over training seeds",
        "not measured: the reference ran one seed; the MDE below is before seed variance",
    ),
}


@dataclass(frozen=True)
class Budget:
    low: float
    high: float

    def __add__(self, other: Budget) -> Budget:
        return Budget(self.low + other.low, self.high + other.high)

    def scaled(self, factor: float) -> Budget:
        return Budget(self.low * factor, self.high * factor)

    def rounded(self, digits: int = 0) -> list[float]:
        return [round(self.low, digits), round(self.high, digits)]


def _seconds(name: str) -> Budget:
    gpus = INPUTS["gpus"].low
    return Budget(INPUTS[name].low * gpus / 3600, INPUTS[name].high * gpus / 3600)


def episodes_hours(episodes: float) -> Budget:
    """GPU-hours to generate `episodes` rollouts at the reference's serving rate."""
    return _seconds("rollout_s").scaled(episodes / INPUTS["episodes_per_batch"].low)


def run_hours(config: dict[str, Any], *, gated: bool, slow_loop: bool) -> dict[str, Budget]:
    """One `train run`, by part: rollouts (one wave per step), updates, gates (bare + masked
    rollout per validation task), the slow loop (retries and verifications)."""
    rounds = int(config["rounds"])
    steps = rounds * int(config["steps_per_round"])
    generated = int(config.get("groups_per_wave", 32)) * int(config.get("group_size", 8))
    admitted = int(config.get("groups_admitted", 16)) * int(config.get("group_size", 8))
    update = _seconds("update_s").scaled(steps * admitted / INPUTS["admitted_per_batch"].low)
    val = int(config.get("gate", {}).get("val_tasks", 400))
    share = rounds / 4  # the reference's counts are for 4 rounds
    slow = INPUTS["all_wrong_groups"].low + INPUTS["cards"].low * (
        INPUTS["verification_episodes_per_card"].low
    )
    return {
        "rollouts": episodes_hours(steps * generated),
        "updates": update,
        "gates": episodes_hours(2 * val * rounds) if gated else Budget(0, 0),
        "slow_loop": episodes_hours(slow * share) if slow_loop else Budget(0, 0),
    }


def has_gates(arm) -> bool:
    """Whether the arm's runs hold gates (grpo and fixed-s0 have no slow loop; no-gate admits)."""
    gate = arm.overrides.get("gate", {})
    return arm.overrides.get("skill_loop", True) and gate.get("admit", "gate") == "gate"


def has_slow_loop(arm) -> bool:
    return arm.overrides.get("skill_loop", True)


def test_conditions(runs: int) -> int:
    """Base bare and its A/A copy; per run: bare, with its bank, and the bank's A/A copy."""
    return 2 + 3 * runs


def design_mde(test_tasks: int, seeds: int, contrasts: int) -> dict[str, Any]:
    """The planned design's MDE on test success, from the named paired and seed SDs."""
    se = stats.paired_se(
        INPUTS["paired_sd"].low ** 2, test_tasks, 2 * INPUTS["seed_sd"].low ** 2, seeds
    )
    return {
        "alpha": stats.ALPHA,
        "power": stats.POWER,
        "mde": {"r_success": round(stats.mde(se), 4)},
        "mde_holm_first_step": {
            "r_success": round(stats.mde(se, alpha=stats.ALPHA / max(1, contrasts)), 4)
        },
        "contrasts": contrasts,
        "basis": (
            f"(z_(1-alpha/2) + z_power) x SE, SE = paired_sd / sqrt({test_tasks} test tasks)"
            + (" (+ seed variance)" if INPUTS["seed_sd"].low else ", before seed variance")
            + f"; {contrasts} contrasts (each arm against the first, bank and bare): the "
            "first Holm step tests at alpha / contrasts"
        ),
    }


def experiment_hours(
    config: dict[str, Any], arms: list, seeds: int, *, test_tasks: int, cold_start_tasks: int
) -> dict[str, Any]:
    """Per arm and in all: training, gates, slow loop, the shared cold start and Gate A, the
    test job; and the design's MDE."""
    val = int(config.get("gate", {}).get("val_tasks", 400))
    per_arm = {}
    for arm in arms:
        parts = run_hours(config, gated=has_gates(arm), slow_loop=has_slow_loop(arm))
        per_arm[arm.name] = {name: b.scaled(seeds) for name, b in parts.items()}
    shared = episodes_hours(cold_start_tasks + 2 * val)  # bare cold-start runs, Gate A
    runs = len(arms) * seeds
    test = episodes_hours(test_tasks * test_conditions(runs))
    total = shared + test
    for parts in per_arm.values():
        for hours in parts.values():
            total += hours
    contrasts = 2 * (len(arms) - 1)
    return {
        "reference_gpus": f"{INPUTS['gpus'].low:g} x A800-SXM 80 GB",
        "per_arm": {
            name: {
                "total": sum(parts.values(), Budget(0, 0)).rounded(),
                **{part: hours.rounded(1) for part, hours in parts.items()},
            }
            for name, parts in per_arm.items()
        },
        "cold_start_and_gate_a": shared.rounded(1),
        "test": test.rounded(1),
        "test_conditions": test_conditions(runs),
        "total": total.rounded(),
        "days_on_reference_gpus": [
            round(h / INPUTS["gpus"].low / 24, 1) for h in (total.low, total.high)
        ],
        "runs": runs,
        "power": design_mde(test_tasks, seeds, contrasts),
        "inputs": {name: asdict(value) for name, value in INPUTS.items()},
    }


def summary(hours: dict[str, Any]) -> str:
    """The estimate's headline: GPU-hours and the MDE, in one paragraph."""
    p = hours["power"]
    low, high = hours["total"]
    return (
        f"{hours['runs']} runs: {low:,.0f}-{high:,.0f} GPU-hours on {hours['reference_gpus']} "
        f"({hours['days_on_reference_gpus'][0]}-{hours['days_on_reference_gpus'][1]} days); "
        f"MDE on test success {100 * p['mde']['r_success']:.1f} pp at alpha {p['alpha']}, power "
        f"{p['power']:.0%} ({100 * p['mde_holm_first_step']['r_success']:.1f} pp at the first "
        f"Holm step of {p['contrasts']} contrasts), {p['basis'].split('; ')[0]}"
    )
