"""The page/action state machine, every reason code, the step cap and the env contract."""

from __future__ import annotations

import pytest

from shared.shopsim.actions import parse_action
from shared.shopsim.env import EpisodeOver, ShopEnv
from shared.shopsim.types import StepResult


def _open_item(env: ShopEnv, task_id: str):
    """An episode on the gold's product page (found by searching its title)."""
    task = env.task(task_id)
    episode, _ = env.reset(task_id)
    episode.step(f"search[{task.gold_title}]")
    result = episode.step(f"click[{task.gold_asin}]")
    assert result.state.page == "item"
    return episode, result, task


def _task_with_axes(env: ShopEnv, count: int = 1) -> str:
    for task_id in env.task_ids("train"):
        product = env.world.catalog[env.task(task_id).gold_asin]
        if len(product.options) >= count and all(len(e) >= 2 for _, e in product.options):
            return task_id
    raise AssertionError("no task with enough option axes")


@pytest.mark.parametrize(
    ("action", "reason"),
    [("", "invalid_format"), ("buy now", "invalid_format"), ("foo[bar]", "invalid_format"),
     ("search[a", "invalid_format"), ("search[]", "empty_argument"),
     ("click[  ]", "empty_argument"),
     ("search[a] click[b]", "multiple_actions_not_allowed"),
     ("click[a], click[b]", "multiple_actions_not_allowed"),
     ("Action: click[a]\nAction: click[b]", "multiple_actions_not_allowed")],
)  # fmt: skip
def test_parse_errors(action: str, reason: str) -> None:
    assert parse_action(action).error == reason


def test_parse_ok() -> None:
    parsed = parse_action("  Search[ wireless  headphones ] ")
    assert (parsed.verb, parsed.argument, parsed.error) == ("search", "wireless  headphones", None)


def test_first_observation_is_the_search_home(env: ShopEnv) -> None:
    task_id = env.task_ids("val")[0]
    episode, first = env.reset(task_id, seed=3)
    assert isinstance(first, StepResult)
    assert first.state.page == "search" and first.state.search_available
    assert first.state.clickables == () and first.state.step == 0 and not first.done
    assert first.observation.startswith("Page: search home")
    assert episode.task.instruction == env.task(task_id).instruction_simple


def test_invalid_actions_consume_a_step_and_keep_the_page(env: ShopEnv) -> None:
    episode, result, _ = _open_item(env, _task_with_axes(env))
    before = result.observation.split("\nLast action:")[0]
    for action, reason in [
        ("search[x]", "search_unavailable"),
        ("click[nowhere]", "unavailable_action"),
        ("click[buy now]", "incomplete_options"),
        ("nonsense", "invalid_format"),
        ("click[]", "empty_argument"),
        ("click[a] click[b]", "multiple_actions_not_allowed"),
    ]:
        step = episode.steps
        result = episode.step(action)
        assert result.reason == reason, action
        assert episode.steps == step + 1 and not result.done
        assert result.observation.split("\nLast action:")[0] == before
        assert f"invalid ({reason})" in result.observation
        assert result.info["action_valid"] is False


def test_options_selection_buy_and_already_selected(env: ShopEnv) -> None:
    episode, result, task = _open_item(env, _task_with_axes(env))
    assert "buy now" not in result.state.clickables
    for axis, value in task.gold_options.items():
        result = episode.step(f"click[{axis}={value}]")
        assert result.reason == "ok"
        assert f"{axis}={value}" not in result.state.clickables
    axis, value = next(iter(task.gold_options.items()))
    assert episode.step(f"click[{axis}={value}]").reason == "already_selected"
    result = episode.step("click[attributes]")
    assert result.state.page == "attributes" and "Attributes:" in result.observation
    assert episode.step(f"click[{axis}={value}]").reason == "already_selected"
    result = episode.step("click[< prev]")
    assert result.state.page == "item" and "buy now" in result.state.clickables
    result = episode.step("click[BUY NOW]")  # labels match case-insensitively
    assert result.done and result.state.page == "done" and result.state.clickables == ()
    assert result.breakdown is not None and result.breakdown.r_success == 1
    assert result.reward == result.breakdown.r_strict == 1.0
    assert result.info["reward_detail"]["termination_reason"] == "purchase"
    with pytest.raises(EpisodeOver):
        episode.step("click[buy now]")


def test_results_paging_back_and_prev(env: ShopEnv) -> None:
    episode, _ = env.reset(env.task_ids("train")[0])
    result = episode.step("search[black]")
    assert result.state.page == "results" and "< prev" not in result.state.clickables
    per_page = env.site.results_per_page
    ids = [c for c in result.state.clickables if c.startswith("B0")]
    assert len(ids) == per_page and "next >" in result.state.clickables
    result = episode.step("click[next >]")
    assert "< prev" in result.state.clickables
    assert not set(ids) & {c for c in result.state.clickables if c.startswith("B0")}
    assert "Results page 2 of" in result.observation
    result = episode.step("click[< prev]")
    assert [c for c in result.state.clickables if c.startswith("B0")] == ids
    result = episode.step(f"click[{ids[0].lower()}]")
    assert result.state.page == "item" and ids[0] in result.observation
    result = episode.step("click[< prev]")
    assert result.state.page == "results"
    result = episode.step("click[back to search]")
    assert result.state.page == "search" and result.state.search_available


def test_action_limit_ends_with_zero(env: ShopEnv) -> None:
    episode, _ = env.reset(env.task_ids("train")[1])
    result = None
    for _ in range(30):
        result = episode.step("click[nothing]")
    assert result is not None and result.done and result.reward == 0.0
    assert result.breakdown.termination_reason == "action_limit"
    assert result.breakdown.components() == dict.fromkeys(result.breakdown.components(), 0.0)
    assert result.state.step == 30


def test_purchase_on_the_last_step_is_scored(env: ShopEnv) -> None:
    episode, result, task = _open_item(env, env.task_ids("train")[2])
    while episode.steps < 29 - len(task.gold_options):
        episode.step("click[nothing]")
    for axis, value in task.gold_options.items():
        episode.step(f"click[{axis}={value}]")
    result = episode.step("click[buy now]")
    assert episode.steps == 30 and result.breakdown.termination_reason == "purchase"


def test_generation_length_termination(env: ShopEnv) -> None:
    episode, _ = env.reset(env.task_ids("train")[0])
    result = episode.terminate("generation_length")
    assert result.done and result.reward == 0.0
    assert result.breakdown.termination_reason == "generation_length"


def test_observations_never_show_the_goal(env: ShopEnv) -> None:
    for task_id in env.task_ids("test")[:10]:
        task = env.task(task_id)
        episode, first = env.reset(task_id)
        result = episode.step("search[zzzz]")
        for text in (first.observation, result.observation):
            assert task.gold_asin not in text and task.instruction not in text


def test_many_concurrent_episodes_share_one_world(env: ShopEnv) -> None:
    ids = env.task_ids("train")
    episodes = [env.reset(ids[i % len(ids)], seed=i)[0] for i in range(2000)]
    for number, episode in enumerate(episodes):
        episode.step(f"search[{'black' if number % 2 else 'white'}]")
    assert len({id(e.site.index) for e in episodes}) == 1
    assert episodes[0].site.results == episodes[2].site.results
    assert episodes[1].site.results != episodes[0].site.results


def test_versions_and_splits(env: ShopEnv) -> None:
    assert env.version.startswith("shopsim-v1:test-")
    assert env.version == ShopEnv(env.world).version
    assert [len(env.task_ids(s)) for s in ("train", "val", "test")] == [60, 20, 20]
    with pytest.raises(KeyError):
        env.task_ids("dev")
    with pytest.raises(KeyError):
        env.reset("task-999999")
