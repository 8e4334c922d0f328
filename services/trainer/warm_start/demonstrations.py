"""From teacher trajectories to SFT examples: the successful ones, what they cover, their
pre-tokenized segments with the runtime's loss mask, and the fingerprint that names the cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.trainer.warm_start.plan import (
    WARM_START_SCHEMA,
    WarmStartPlan,
)
from shared.contracts.hashing import content_hash
from shared.runtime.agent.trajectory import Trajectory


def demonstrations(trajectories: Sequence[Trajectory], episodes: int) -> list[Trajectory]:
    """The first `episodes` successful trajectories: the ones SFT trains on."""
    return [
        trajectory
        for trajectory in trajectories
        if trajectory.scored and trajectory.components.get("r_success") == 1.0
    ][:episodes]


def demonstration_shapes(demos: Sequence[Trajectory]) -> dict[str, Any]:
    """What the demonstrations cover: turns per episode, two-axis purchases, hints shown."""
    turns = [len(demo.steps) for demo in demos]
    two_axis = sum(
        len(
            {
                step.action.split("=", 1)[0]
                for step in demo.steps
                if step.action and "=" in step.action
            }
        )
        >= 2
        for demo in demos
    )
    return {
        "episodes": len(demos),
        "turns": {str(n): turns.count(n) for n in sorted(set(turns))},
        "two_axis_purchases": two_axis,
        "skill_block": hint_counts(demos),
    }


def hint_counts(trajectories: Sequence[Trajectory]) -> dict[str, int]:
    """How many trajectories carried each injected chunk (reading hints) or none."""
    counts: dict[str, int] = {}
    for trajectory in trajectories:
        for name in trajectory.provenance.injected or ["none"]:
            counts[name] = counts.get(name, 0) + 1
    return counts


def sft_examples(trajectories: Sequence[Trajectory], episodes: int) -> list[dict[str, list[int]]]:
    """One pre-tokenized example per segment of the first `episodes` successful trajectories.

    `assistant_masks` is the runtime's loss mask: 1 exactly on the generated tokens (the action
    and its end-of-turn token), so the SFT loss falls on what the policy writes and never on the
    prompt, the persona or the pages it reads.
    """
    successful = demonstrations(trajectories, episodes)
    if len(successful) < episodes:
        raise ValueError(
            f"the heuristic agent succeeded on {len(successful)} train tasks; "
            f"{episodes} were asked for (lower warm_start.episodes or raise max_turns)"
        )
    return [
        {"input_ids": list(segment.token_ids), "assistant_masks": list(segment.loss_mask)}
        for trajectory in successful
        for segment in trajectory.segments
    ]


def fingerprint(plan: WarmStartPlan, examples: Sequence[dict[str, list[int]]], base: str) -> str:
    """Hash of the training settings, the exact training tokens and the base checkpoint id."""
    return content_hash(
        {
            "schema": WARM_START_SCHEMA,
            "settings": plan.training_settings(),
            "data": content_hash(list(examples)),
            "base": base,
        }
    )
