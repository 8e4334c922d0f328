"""The teacher: ShopSim's heuristic agent behind a scripted policy backend, so every
demonstration is exactly what the runtime records for the policy (layout, token ids, loss mask);
with reading hints, a seeded share of episodes shows one hint and acts it out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.trainer.warm_start.plan import (
    TEACHER_ID,
    WarmStartPlan,
)
from shared.runtime.agent.backends.base import (
    TurnFailure,
    TurnOutput,
    TurnRequest,
    token_level_output,
)
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.agents import HeuristicAgent
from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.types import Episode, StepResult


@dataclass
class _Mirror:
    """The teacher's copy of one episode (ShopSim is deterministic: it tracks the runtime's)."""

    agent: HeuristicAgent
    episode: Episode
    result: StepResult


class HeuristicTeacherBackend:
    """A scripted policy backend, not a model: each turn it writes the heuristic agent's action.

    It plays every episode on its own copy of the environment (same task and seed; pages are a
    deterministic function of the actions) to know the page the heuristic acts on, and returns
    the action as token ids from the policy's chat renderer followed by the end-of-turn token, so
    the runtime records exactly the tokens the policy would have to generate.
    """

    name = "heuristic-teacher"
    model_id = TEACHER_ID
    checkpoint_id = TEACHER_ID

    def __init__(
        self,
        env: ShopEnv,
        renderer: ChatRenderer,
        episodes: Mapping[str, tuple[str, int]],
        styles: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.env, self.renderer = env, renderer
        self.episodes = dict(episodes)  # episode id -> (task id, seed)
        self.styles = dict(styles or {})  # episode id -> HeuristicAgent style (a reading hint)
        self.end_of_turn = _end_of_turn_token(renderer)
        self._live: dict[str, _Mirror] = {}

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        return [self._turn(request) for request in requests]

    def _turn(self, request: TurnRequest) -> TurnOutput | TurnFailure:
        mirror = self._live.get(request.key)
        if mirror is None:
            task_id, seed = self.episodes[request.key]
            episode, first = self.env.reset(task_id, seed=seed)
            agent = HeuristicAgent(self.env.task_view(task_id), **self.styles.get(request.key, {}))
            mirror = self._live[request.key] = _Mirror(agent, episode, first)
        if request.prompt_ids is None:
            return TurnFailure("the teacher needs the runtime's exact prompt ids")
        action = mirror.agent.act(mirror.result)
        mirror.result = mirror.episode.step(action)
        # A turn longer than the policy may generate is cut, as a model's would be; the runtime
        # then ends the episode (generation_length) and it is not kept.
        generated = [*self.renderer.encode(action), self.end_of_turn][: request.max_new_tokens]
        return token_level_output(
            self.renderer,
            request.prompt_ids,
            generated,
            [0.0] * len(generated),
            request.max_new_tokens,
        )

    def release(self, key: str) -> None:
        self._live.pop(key, None)

    def close(self) -> None:
        self._live.clear()


def _end_of_turn_token(renderer: ChatRenderer) -> int:
    """The token the chat template writes after an assistant message (ChatML's <|im_end|>)."""
    tokenizer = renderer.tokenizer
    if "<|im_end|>" in tokenizer.get_vocab():
        return int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos token")
    return int(tokenizer.eos_token_id)


def teacher_trajectories(
    env: ShopEnv,
    renderer: ChatRenderer,
    plan: WarmStartPlan,
    *,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """The heuristic agent on the train split, in task order, rendered in the policy's layout;
    with `plan.reading_hints`, that share of episodes shows one reading hint and acts it out."""
    from shared.runtime.agent.runner import RolloutConfig, RolloutEngine

    specs, styles = hinted_specs(env.task_ids("train"), plan.seed, plan.reading_hints)
    backend = HeuristicTeacherBackend(
        env, renderer, {spec.resolved_id(): (spec.task_id, spec.seed) for spec in specs}, styles
    )
    config = RolloutConfig(
        prompt_version=plan.prompt_version,
        decoding=plan.decoding,
        concurrency=64,
        max_turns=plan.max_turns,
    )
    return RolloutEngine(env, backend, config).run(specs, on_trajectory)  # type: ignore[arg-type]


def hinted_specs(
    task_ids: Sequence[str], seed: int, share: float
) -> tuple[list[Any], dict[str, Mapping[str, Any]]]:
    """One teacher episode per task; a seeded `share` of them carries one reading hint (drawn
    uniformly) in the skill block, with the style the teacher must act out under its id."""
    import random

    from services.trainer.reading_hints import HINTS
    from shared.runtime.agent.runner import EpisodeSpec

    draw = random.Random(f"{seed}:reading-hints")
    hints = list(HINTS.values())
    specs, styles = [], {}
    for task_id in task_ids:
        hinted = share > 0 and draw.random() < share
        hint = draw.choice(hints) if hinted else None
        spec = EpisodeSpec(task_id, seed, chunks=(hint.chunk(),) if hint else ())
        if hint:
            styles[spec.resolved_id()] = hint.teacher_style
        specs.append(spec)
    return specs, styles
