"""GPU-hours an experiment needs, estimated from the reference's measured step times.

The reference ran on 4 x A800-SXM 80 GB, colocated (rollout and update share the GPUs), at
about 13.5k generated tokens/s: a rollout step's batch (128 admitted episodes from waves of
32 x 8) took 209-245 s, and an update 250-500 s per step (over 500 s on long-sample steps). A
gate or a test condition is served at the same rate: 128 episodes take a rollout batch's time.
These are the reference's figures; our own trainer has not run at this scale (docs/trainer.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REFERENCE_GPUS = 4
ROLLOUT_S = (209.0, 245.0)  # per rollout step (a batch of 128 admitted episodes)
UPDATE_S = (250.0, 500.0)  # per rollout step (2 optimizer updates)
EPISODES_PER_BATCH = 128


@dataclass(frozen=True)
class Budget:
    low: float
    high: float

    def __add__(self, other: Budget) -> Budget:
        return Budget(self.low + other.low, self.high + other.high)

    def scaled(self, factor: float) -> Budget:
        return Budget(self.low * factor, self.high * factor)


def episodes_hours(episodes: int) -> Budget:
    """GPU-hours to serve `episodes` rollouts at the reference's rate."""
    batches = episodes / EPISODES_PER_BATCH
    return Budget(*(batches * s * REFERENCE_GPUS / 3600 for s in ROLLOUT_S))


def run_hours(config: dict[str, Any], *, gated: bool) -> Budget:
    """One `train run`: its rollout steps and updates, and a gate per round when it has gates
    (bare + masked rollout per validation task)."""
    steps = int(config["rounds"]) * int(config["steps_per_round"])
    per_step = [(r + u) * REFERENCE_GPUS / 3600 for r, u in zip(ROLLOUT_S, UPDATE_S, strict=True)]
    hours = Budget(steps * per_step[0], steps * per_step[1])
    if gated:
        val = int(config.get("gate", {}).get("val_tasks", 400))
        hours += episodes_hours(2 * val).scaled(int(config["rounds"]))
    return hours


def has_gates(arm) -> bool:
    """Whether the arm's runs hold gates (grpo and fixed-s0 have no slow loop; no-gate admits)."""
    gate = arm.overrides.get("gate", {})
    return arm.overrides.get("skill_loop", True) and gate.get("admit", "gate") == "gate"


def experiment_hours(
    config: dict[str, Any], arms: list, seeds: int, *, test_tasks: int, cold_start_tasks: int
) -> dict[str, Any]:
    """Per arm and in all: training, gates, the shared cold start and Gate A, the test job."""
    val = int(config.get("gate", {}).get("val_tasks", 400))
    per_arm = {arm.name: run_hours(config, gated=has_gates(arm)).scaled(seeds) for arm in arms}
    shared = episodes_hours(cold_start_tasks + 2 * val)  # bare cold-start runs, Gate A
    runs = len(arms) * seeds
    test = episodes_hours(test_tasks * (2 * runs + 2))  # bare and with bank per run, base, A/A
    total = shared + test
    for hours in per_arm.values():
        total += hours
    return {
        "reference_gpus": f"{REFERENCE_GPUS} x A800-SXM 80 GB",
        "per_arm": {name: [round(h.low), round(h.high)] for name, h in per_arm.items()},
        "cold_start_and_gate_a": [round(shared.low, 1), round(shared.high, 1)],
        "test": [round(test.low, 1), round(test.high, 1)],
        "total": [round(total.low), round(total.high)],
        "runs": runs,
    }
