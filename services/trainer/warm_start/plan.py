"""What a warm start depends on (`WarmStartPlan`), resolved from the trainer config, and the
settings that enter its fingerprint."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shared.runtime.agent.decoding import DecodingConfig

WARM_START_SCHEMA = "intraskill-warm-start-v1"
SUMMARY_FILE = "warm_start.json"
TEACHER_ID = "shopsim-heuristic-agent"


@dataclass(frozen=True)
class WarmStartPlan:
    """Everything a warm start depends on, resolved from the trainer config (and nothing else)."""

    model: str
    """'smollm2', 'tiny' or a model folder: the base the SFT starts from."""
    env_preset: str
    prompt_version: str
    decoding: DecodingConfig
    max_turns: int | None
    episodes: int
    """Successful teacher trajectories wanted (train split, in task order)."""
    epochs: float
    lr: float
    batch_size: int
    """Examples per optimizer step (micro-batches of one, accumulated)."""
    max_length: int
    seed: int
    eval_tasks: int
    """Validation tasks for the before/after rates (first N of the split, one episode each)."""
    cache_dir: str
    dtype: str = "float32"
    device: str = "cpu"
    reading_hints: float = 0.0
    """Share of teacher episodes with one reading hint in the skill block, acted out (0: none)."""

    @classmethod
    def from_trainer_config(cls, config: Any, **overrides: Any) -> WarmStartPlan:
        """The plan of a `TrainerConfig`: its layout, decoding and step cap, its SFT section."""
        from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING
        from shared.runtime.agent.prompts import DEFAULT_LAYOUT

        section = config.warm_start
        values = {
            "model": config.model,
            "env_preset": config.env_preset,
            "prompt_version": config.prompt_version or DEFAULT_LAYOUT,
            "decoding": PAPER_DECODING if config.decoding == "paper" else CPU_DECODING,
            "max_turns": config.max_turns,
            "episodes": section.episodes,
            "epochs": section.epochs,
            "lr": section.lr,
            "batch_size": section.batch_size,
            "max_length": section.max_length,
            "seed": config.seed,
            "eval_tasks": section.eval_tasks,
            "cache_dir": section.cache_dir,
            "dtype": config.dtype,
            "device": config.device,
            "reading_hints": section.reading_hints,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    def training_settings(self) -> dict[str, Any]:
        """The settings that change the trained weights (the fingerprint's config part)."""
        settings = asdict(self)
        for key in ("cache_dir", "eval_tasks", "device"):
            settings.pop(key)
        if not self.reading_hints:  # a plain warm start keeps the fingerprint it always had
            settings.pop("reading_hints")
        settings["decoding"] = self.decoding.to_dict()
        return settings
