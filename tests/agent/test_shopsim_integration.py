"""The runtime on the real ShopSim environment (`test` preset): purchases, endings, forks."""

from __future__ import annotations

import json

import pytest

from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.task import Task
from shared.runtime.shopsim.types import StepResult
from tests.agent.doubles import ScriptedBackend


class Recording:
    """ShopEnv, remembering each episode's latest result so a gold-following script can read it."""

    def __init__(self, env: ShopEnv) -> None:
        self.env, self.version = env, env.version
        self.latest: dict[str, StepResult] = {}
        self.episodes: dict[str, object] = {}

    def task_ids(self, split: str) -> list[str]:
        return self.env.task_ids(split)

    def reset(self, task_id: str, seed: int = 0):
        episode, first = self.env.reset(task_id, seed)
        self.latest[task_id] = first
        self.episodes[task_id] = episode
        latest = self.latest

        class Episode:
            task = episode.task

            def step(self, action: str) -> StepResult:
                latest[task_id] = episode.step(action)
                return latest[task_id]

            def terminate(self, reason: str) -> StepResult:
                return episode.terminate(reason)

        return Episode(), first


def gold_action(task: Task, result: StepResult) -> str:
    """Search the gold title, page to the gold item, pick the gold options, buy."""
    state = result.state
    if state.page == "search":
        return f"search[{task.gold_title}]"
    if state.page == "results":
        if task.gold_asin in state.clickables:
            return f"click[{task.gold_asin}]"
        return "click[next >]" if "next >" in state.clickables else "click[back to search]"
    if state.page == "attributes":
        return "click[< prev]"
    for axis, value in task.gold_options.items():
        if f"{axis}={value}" in state.clickables:
            return f"click[{axis}={value}]"
    return "click[buy now]"


@pytest.fixture(scope="module")
def shop() -> ShopEnv:
    return ShopEnv.from_preset("test")


def gold_backend(
    renderer, recording: Recording, shop: ShopEnv, *, tools: bool = False
) -> ScriptedBackend:
    def script(request, turn):
        action = gold_action(shop.task(request.key), recording.latest[request.key])
        if not tools:
            return action
        name, argument = action[:-1].split("[", 1)
        key = "query" if name == "search" else "value"
        return (
            "<tool_call>"
            + json.dumps({"name": name, "arguments": {key: argument}})
            + "</tool_call>"
        )

    return ScriptedBackend(renderer, script)


def test_gold_policy_buys_and_is_scored_by_shopsim(renderer, shop) -> None:
    recording = Recording(shop)
    task_ids = shop.task_ids("val")[:6]
    specs = [EpisodeSpec(task_id, seed=0, episode_id=task_id, group_id="g") for task_id in task_ids]
    config = RolloutConfig(decoding=DecodingConfig(max_new_tokens=64), concurrency=3)
    engine = RolloutEngine(recording, gold_backend(renderer, recording, shop), config)
    trajectories = engine.run(specs)
    assert all(t.scored for t in trajectories)
    bought = [t for t in trajectories if t.termination == "purchase"]
    assert len(bought) >= 5
    for trajectory in bought:
        episode = recording.episodes[trajectory.task_id]
        assert trajectory.components == {
            k: float(v) for k, v in episode.breakdown.components().items()
        }
        assert trajectory.components["r_type"] == 1.0
        assert trajectory.steps[-1].action == "click[buy now]" and trajectory.steps[-1].done
    assert sum(t.components["r_success"] for t in trajectories) >= 4
    assert trajectories[0].provenance.env_version == shop.version
    assert all(len(t.segments) == 1 for t in trajectories)  # text protocol: no forks
    # The environment and scoring are a small part of the loop (no model here, so no ratio bar).
    assert engine.stats.env_s > 0 and engine.stats.turns == sum(len(t.steps) for t in trajectories)


def test_tools_protocol_on_shopsim_forks_per_page(renderer, shop) -> None:
    recording = Recording(shop)
    task_id = shop.task_ids("val")[0]
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-tools-v1", decoding=DecodingConfig(max_new_tokens=64)
    )
    engine = RolloutEngine(recording, gold_backend(renderer, recording, shop, tools=True), config)
    [trajectory] = engine.run([EpisodeSpec(task_id, 0, episode_id=task_id)])
    assert trajectory.termination == "purchase" and trajectory.scored
    assert len(trajectory.segments) >= 2
    assert sum(len(segment.turns) for segment in trajectory.segments) == len(trajectory.steps)


def test_runtime_endings_close_the_shopsim_episode(renderer, shop) -> None:
    recording = Recording(shop)
    task_ids = shop.task_ids("val")[:2]

    def script(request, turn):
        if request.key == task_ids[0]:
            return "hmm"  # protocol errors until the runtime's step cap
        return ("search[half a query", "length")

    config = RolloutConfig(decoding=DecodingConfig(max_new_tokens=64), max_turns=3)
    trajectories = RolloutEngine(recording, ScriptedBackend(renderer, script), config).run(
        [EpisodeSpec(task_id, 0, episode_id=task_id) for task_id in task_ids]
    )
    assert [t.termination for t in trajectories] == ["action_limit", "generation_length"]
    for trajectory in trajectories:
        episode = recording.episodes[trajectory.task_id]
        assert episode.done and episode.breakdown.termination_reason == trajectory.termination
        assert trajectory.scored and trajectory.reward == 0.0
    assert recording.episodes[task_ids[0]].steps == 0  # protocol errors never reached the site
