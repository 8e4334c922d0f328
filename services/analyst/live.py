"""Live tests of a repair: act in a fresh environment session of the same task, following the
repair, and report each trial's terminal result.

The rules backend's tester is the `procedural` policy (a TEST DOUBLE): it follows exactly the
chunks it recognises, so a trial with the bank plus a proposed chunk shows whether following
that chunk's procedure reaches a terminal success on this task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from shared.agent.backends.procedural import ProceduralPolicy
from shared.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.agent.trajectory import Trajectory
from shared.chunks import InjectedChunk
from shared.shopsim.types import Environment


@dataclass(frozen=True)
class Trial:
    """One terminal trial: what was followed, and the environment's verdict."""

    repair: tuple[str, ...]  # the mechanisms added to the bank for this trial
    reward: float
    success: bool
    termination: str | None
    valid_actions: int
    steps: int
    trajectory: Trajectory | None = field(default=None, compare=False)

    def as_dict(self) -> dict:
        record = asdict(self)
        record.pop("trajectory")
        return {**record, "repair": list(self.repair)}


def live_trial(
    env: Environment,
    task_id: str,
    chunks: Sequence[InjectedChunk],
    repair: Sequence[str],
    *,
    seed: int,
    prompt_version: str | None = None,
) -> Trial:
    """One fresh episode of `task_id` by the procedural tester with `chunks` in its prompt."""
    tester = ProceduralPolicy("live-tester", slip=0.0)
    extra = {"prompt_version": prompt_version} if prompt_version else {}
    config = RolloutConfig(concurrency=1, **extra)
    spec = EpisodeSpec(task_id=task_id, seed=seed, chunks=tuple(chunks))
    (trajectory,) = run_episodes(env, tester, [spec], config)
    valid = sum(
        step.action is not None and step.protocol_error is None for step in trajectory.steps
    )
    return Trial(
        repair=tuple(repair),
        reward=trajectory.reward,
        success=trajectory.scored and trajectory.components.get("r_success") == 1.0,
        termination=trajectory.termination,
        valid_actions=valid,
        steps=len(trajectory.steps),
        trajectory=trajectory,
    )
