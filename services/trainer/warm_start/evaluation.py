"""Before / after: valid-action and success rates of a policy on validation tasks, with the
trainer's decoding, prompt layout and turn cap."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from services.trainer.warm_start.plan import (
    WarmStartPlan,
)
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.env import ShopEnv


def policy_rates(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Valid-action rate (turns whose action the shop accepted), success rate, mean reward."""
    turns = [step for trajectory in trajectories for step in trajectory.steps]
    valid = sum(step.action is not None and step.env_reason == "ok" for step in turns)
    episodes = len(trajectories)
    return {
        "episodes": episodes,
        "turns": len(turns),
        "valid_actions": valid,
        "valid_action_rate": valid / len(turns) if turns else 0.0,
        "success_rate": (
            sum(t.components.get("r_success", 0.0) == 1.0 for t in trajectories) / episodes
            if episodes
            else 0.0
        ),
        "reward_mean": sum(t.reward for t in trajectories) / episodes if episodes else 0.0,
        "scored_rate": sum(t.scored for t in trajectories) / episodes if episodes else 0.0,
    }


def evaluate_policy(
    model_dir: Path, env: ShopEnv, plan: WarmStartPlan, on_episode: Callable[[], None] | None = None
) -> dict[str, float]:
    """The policy's rates on the first `eval_tasks` validation tasks (one episode each)."""
    from shared.runtime.agent.backends import make_backend
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine

    backend = make_backend("transformers", str(model_dir), dtype=plan.dtype, device=plan.device)
    try:
        specs = [EpisodeSpec(task_id, plan.seed) for task_id in env.task_ids("val")]
        specs = specs[: plan.eval_tasks]
        config = RolloutConfig(
            prompt_version=plan.prompt_version,
            decoding=plan.decoding,
            concurrency=16,
            max_turns=plan.max_turns,
        )
        trajectories = RolloutEngine(env, backend, config).run(
            specs, (lambda _: on_episode()) if on_episode else None
        )
    finally:
        backend.close()
    return policy_rates(trajectories)
