"""The page/action state machine, every reason code, the step cap and the env contract."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from shared.runtime.shopsim.actions import parse_action
from shared.runtime.shopsim.env import EpisodeOver, ShopEnv
from shared.runtime.shopsim.presets import PRESETS
from shared.runtime.shopsim.search import Bm25Index
from shared.runtime.shopsim.site import SiteConfig
from shared.runtime.shopsim.types import StepResult


@pytest.fixture(scope="module")
def hints_env(env: ShopEnv) -> ShopEnv:
    """The same world with the earlier `hints` pages."""
    return ShopEnv(env.world, site=replace(env.site, style="hints"))


@pytest.fixture(scope="module")
def paper_pages(env: ShopEnv) -> ShopEnv:
    """The test world with the paper preset's page settings (the reference's results page)."""
    return ShopEnv(env.world, site=PRESETS["paper"].site)


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
    # the reference has no attributes page, and takes exact labels only
    assert "attributes" not in result.state.clickables
    assert episode.step("click[attributes]").reason == "unavailable_action"
    assert episode.step("click[BUY NOW]").reason == "unavailable_action"
    assert episode.step("click[buy  now]").reason == "unavailable_action"
    result = episode.step("click[buy now]")
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
    assert episode.step(f"click[{ids[0].lower()}]").reason == "unavailable_action"  # exact only
    result = episode.step(f"click[{ids[0]}]")
    assert result.state.page == "item" and ids[0] in result.observation
    result = episode.step("click[< prev]")
    assert result.state.page == "results"
    result = episode.step("click[back to search]")
    assert result.state.page == "search" and result.state.search_available


def test_action_limit_ends_with_zero_and_keeps_the_last_page(env: ShopEnv) -> None:
    episode, result, _ = _open_item(env, env.task_ids("train")[1])
    while episode.steps < 29:
        result = episode.step("click[nothing]")
    page_before = result.observation.split("\nLast action:")[0]
    result = episode.step("click[nothing]")
    assert result.done and result.reward == 0.0
    assert result.breakdown.termination_reason == "action_limit"
    assert result.breakdown.components() == dict.fromkeys(result.breakdown.components(), 0.0)
    assert result.state.step == 30 and result.state.page == "done"
    assert result.state.clickables == ()
    # the reference shows the page the last action left, not a "finished" page
    assert result.observation.split("\nLast action:")[0] == page_before
    assert "Page: product" in result.observation and "finished" not in result.observation


def test_hints_style_action_limit_shows_the_finished_page(hints_env: ShopEnv) -> None:
    episode, _ = hints_env.reset(hints_env.task_ids("train")[1])
    for _ in range(30):
        result = episode.step("click[nothing]")
    assert result.done and result.observation.startswith("Page: finished")


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


def _gold_path(env: ShopEnv, task_id: str) -> list[str]:
    """The actions that buy `task_id`'s gold: search its title, open it, choose, buy."""
    task = env.task(task_id)
    options = [f"click[{axis}={value}]" for axis, value in task.gold_options.items()]
    return [f"search[{task.gold_title}]", f"click[{task.gold_asin}]", *options, "click[buy now]"]


def _pages(env: ShopEnv, task_id: str, actions: list[str]) -> list[str]:
    episode, result = env.reset(task_id)
    pages = [result.observation]
    for action in actions:
        pages.append(episode.step(action).observation)
    return pages


@pytest.mark.parametrize("style", ["reference", "hints"])
def test_pages_never_depend_on_the_goal(env: ShopEnv, style: str) -> None:
    """The pages that could show the goal (the gold's results line, its product page, its
    options, the purchase) read the same whichever task is being played."""
    styled = ShopEnv(env.world, site=replace(env.site, style=style))
    task_ids = env.task_ids("test")[:6]
    for task_id, other_id in zip(task_ids, task_ids[1:] + task_ids[:1], strict=True):
        task = env.task(task_id)
        path = _gold_path(styled, task_id)
        as_gold = _pages(styled, task_id, path)
        as_other = _pages(styled, other_id, path)  # the same actions inside another task
        assert task.gold_asin in as_gold[1] and "Page: product" in as_gold[2]
        assert as_gold == as_other
        for text in as_gold:
            assert task.instruction not in text
            assert not re.search(r"reward|r_strict|gold|target|budget", text, re.IGNORECASE)


def test_concurrent_episodes_in_threads_match_sequential_play(env: ShopEnv) -> None:
    """Real threads through the shared index and the nogil numba kernel (cache off, blocks
    small enough to cross): every episode's pages equal those of playing it alone."""
    index = Bm25Index(env.world.catalog, cache_size=0)
    index.block = 256
    threaded = ShopEnv(replace(env.world, index=index, _version=None), site=env.site)
    task_ids = env.task_ids("train")[:24]
    alone = {task_id: _pages(threaded, task_id, _gold_path(env, task_id)) for task_id in task_ids}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            together = pool.map(lambda t: _pages(threaded, t, _gold_path(env, t)), task_ids * 4)
            for task_id, pages in zip(task_ids * 4, together, strict=True):
                assert pages == alone[task_id], task_id


def test_many_concurrent_episodes_share_one_world(env: ShopEnv) -> None:
    ids = env.task_ids("train")
    episodes = [env.reset(ids[i % len(ids)], seed=i)[0] for i in range(2000)]
    for number, episode in enumerate(episodes):
        episode.step(f"search[{'black' if number % 2 else 'white'}]")
    assert len({id(e.site.index) for e in episodes}) == 1
    assert episodes[0].site.results == episodes[2].site.results
    assert episodes[1].site.results != episodes[0].site.results


def test_reference_pages_carry_no_step_counter_or_action_syntax(env: ShopEnv) -> None:
    task_id = env.task_ids("train")[3]
    actions = ["click[nowhere]", *_gold_path(env, task_id)[:-1]]
    pages = _pages(env, task_id, actions)
    assert pages[0].startswith("Page: search home") and "Search: available\n" in pages[0]
    for text in pages:
        assert not re.search(r"Step \d+ of \d+", text)
        assert "search[" not in text.replace("Last action: search[", "")
        assert "click[" not in text.replace("Last action: click[", "")
        assert "your query" not in text


def test_hints_style_keeps_the_earlier_variant(hints_env: ShopEnv) -> None:
    episode, result, task = _open_item(hints_env, _task_with_axes(hints_env))
    assert "Step 2 of 30." in result.observation and "attributes" in result.state.clickables
    assert "$" in result.observation.split("Price:")[1].split("\n")[0]
    result = episode.step("click[attributes]")
    assert result.state.page == "attributes" and "Attributes:" in result.observation
    result = episode.step("click[< PREV]")  # labels match up to case and spacing
    assert result.state.page == "item"
    home = hints_env.reset(task.task_id)[1].observation
    assert "Search: available (use search[your query])" in home


def test_paper_results_page_is_the_references(env: ShopEnv, paper_pages: ShopEnv) -> None:
    """20 per page, each with brand, category, at most 10 key attributes and the raw listing
    price (`a` or `a to b`, never `$`)."""
    assert PRESETS["paper"].site == SiteConfig()
    assert (SiteConfig().results_per_page, SiteConfig().style) == (20, "reference")
    episode, _ = paper_pages.reset(env.task_ids("train")[0])
    result = episode.step("search[black]")
    ids = [c for c in result.state.clickables if c.startswith("B0")]
    assert len(ids) == 20
    catalog = env.world.catalog
    for rank, asin in enumerate(ids, start=1):
        product = catalog[asin]
        pricing = product.pricing
        price = str(pricing[0]) if len(pricing) == 1 else f"{pricing[0]} to {pricing[1]}"
        block = result.observation.split(f"\n{rank}. {asin} | ")[1].split(f"\n{rank + 1}. ")[0]
        assert block.startswith(f"{product.title} | {price}\n")
        assert f"brand: {product.brand} | category: {product.category}" in block
        keys = block.split("key attributes: ")[1].split("\n")[0].split("; ")
        assert keys == list(product.attributes[:10])
    assert "$" not in result.observation


def test_the_style_is_in_the_version_every_trajectory_records(
    env: ShopEnv, hints_env: ShopEnv
) -> None:
    assert ":reference:" in env.version and env.site_style == "reference"
    assert ":hints:" in hints_env.version and hints_env.version != env.version
    with pytest.raises(ValueError, match="unknown site style"):
        SiteConfig(style="fancy")


def test_versions_and_splits(env: ShopEnv) -> None:
    assert env.version.startswith("shopsim-v2:test-")
    assert env.version == ShopEnv(env.world).version
    assert [len(env.task_ids(s)) for s in ("train", "val", "test")] == [60, 20, 20]
    with pytest.raises(KeyError):
        env.task_ids("dev")
    with pytest.raises(KeyError):
        env.reset("task-999999")
