"""GRPO advantages, counted once per episode and broadcast to the episode's segments.

The reference (`normalize_grpo_by_prompt_and_rollout`): per group, over unique rollout ids,
A = (r - mean) / (std + 1e-6) with the unbiased std. A forked episode contributes one reward to the
group statistics however many segments it has; every segment then carries that one advantage.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.runtime.agent.trajectory import Segment, Trajectory

EPSILON = 1e-6


def normalized_advantages(rewards: Sequence[float], epsilon: float = EPSILON) -> list[float]:
    """(r - mean) / (unbiased std + epsilon); a single reward gets advantage 0."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    if len(rewards) < 2:
        return [0.0 for _ in rewards]
    std = math.sqrt(sum((value - mean) ** 2 for value in rewards) / (len(rewards) - 1))
    return [(value - mean) / (std + epsilon) for value in rewards]


def episode_advantages(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """Advantage per episode id, grouped by `group_id`; unscored episodes get none.

    Repeated records of one episode (a re-sent record, say) count once: the last one wins.
    """
    by_group: dict[str | None, dict[str, float]] = defaultdict(dict)
    for trajectory in trajectories:
        if trajectory.scored:
            by_group[trajectory.group_id][trajectory.episode_id] = trajectory.reward
    advantages: dict[str, float] = {}
    for group, rewards in by_group.items():
        if group is None:
            raise ValueError("episodes without a group_id have no GRPO group")
        ids = list(rewards)
        advantages.update(zip(ids, normalized_advantages([rewards[i] for i in ids]), strict=True))
    return advantages


@dataclass(frozen=True)
class TrainingSample:
    """One segment with the advantage of its episode."""

    episode_id: str
    group_id: str | None
    segment: Segment
    advantage: float


def training_samples(trajectories: Sequence[Trajectory]) -> list[TrainingSample]:
    """Every segment of every scored episode with exact tokens, carrying its episode's advantage."""
    advantages = episode_advantages(trajectories)
    last = {trajectory.episode_id: index for index, trajectory in enumerate(trajectories)}
    samples = []
    for index, trajectory in enumerate(trajectories):
        if last[trajectory.episode_id] != index or trajectory.episode_id not in advantages:
            continue  # an earlier copy of a re-sent record, or an unscored episode
        if not trajectory.exact_tokens:
            raise ValueError(f"episode {trajectory.episode_id} has no exact tokens to train on")
        samples.extend(
            TrainingSample(
                trajectory.episode_id,
                trajectory.group_id,
                segment,
                advantages[trajectory.episode_id],
            )
            for segment in trajectory.segments
        )
    return samples
