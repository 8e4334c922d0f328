"""What a demo run is asked to do: its options, its preset's facts, its run id."""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_CONFIG = REPO / "configs" / "cpu.toml"
JOB_TIMEOUT_S = 24 * 3600.0  # a cold start or a test on a big model runs for hours


class DemoError(RuntimeError):
    """The demo stopped; the message says why and what to do."""


@dataclass(frozen=True)
class PolicyDefaults:
    """The demo's scale for one policy when the command line does not set it."""

    config: Path
    rounds: int
    cold_start_tasks: int


# SmolLM2: the CPU preset at the size that fits two cores. The procedural test double costs
# almost nothing per rollout, so it gets gates on all validation tasks, a wider cold start and a
# third round: at the CPU preset's size its gates could not see the bank's effect reliably.
POLICY_DEFAULTS = {
    "model": PolicyDefaults(DEFAULT_CONFIG, rounds=2, cold_start_tasks=32),
    "procedural": PolicyDefaults(
        REPO / "configs" / "procedural.toml", rounds=3, cold_start_tasks=120
    ),
}


@dataclass(frozen=True)
class DemoOptions:
    policy: str
    out: Path
    config: Path = DEFAULT_CONFIG
    rounds: int = 2
    cold_start_tasks: int = 32
    test_tasks: int = 40
    database_url: str | None = None
    warm_start_eval_tasks: int | None = None  # None: the config's [warm_start] eval_tasks
    warm_start_reading_hints: float | None = None  # None: the config's [warm_start] share


@dataclass(frozen=True)
class PresetFacts:
    """What the demo reads from the trainer's TOML config."""

    steps_per_round: int
    env_preset: str
    decoding: str
    max_turns: int | None
    model: str
    val_tasks: int
    gate_admit: str = "gate"

    @classmethod
    def read(cls, path: Path) -> PresetFacts:
        data = tomllib.loads(path.read_text())
        return cls(
            steps_per_round=int(data.get("steps_per_round", 20)),
            env_preset=str(data.get("env_preset", "cpu")),
            decoding=str(data.get("decoding", "cpu")),
            max_turns=data.get("max_turns"),
            model=str(data.get("model", "smollm2")),
            val_tasks=int(data.get("gate", {}).get("val_tasks", 400)),
            gate_admit=str(data.get("gate", {}).get("admit", "gate")),
        )


def run_id_for(run_dir: Path) -> str:
    """Unique per run folder (services and registries may be shared between runs)."""
    resolved = run_dir.resolve()
    slug = re.sub(r"[^a-z0-9-]+", "-", resolved.name.lower()).strip("-")[:24] or "demo"
    return f"{slug}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:6]}"


def total_steps(options: DemoOptions) -> int:
    return options.rounds * PresetFacts.read(options.config).steps_per_round
