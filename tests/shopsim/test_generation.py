"""Catalogue and task generation: determinism, id shape, split disjointness, solvability."""

from __future__ import annotations

import re

import pytest

from shared.runtime.leak import find_leaks
from shared.runtime.shopsim.catalog import generate_catalog
from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.presets import build_world
from shared.runtime.shopsim.reward import resolve_sku_price, score_purchase
from shared.runtime.shopsim.tasks import TaskSettings, budget_for, generate_tasks
from shared.runtime.shopsim.vocabulary import vocabulary_problems
from shared.runtime.shopsim.world import split_digests


def test_vocabulary_has_no_confusable_values() -> None:
    assert vocabulary_problems() == []


def test_catalogue_is_deterministic_and_seeded() -> None:
    first, again = generate_catalog(300, 7), generate_catalog(300, 7)
    other = generate_catalog(300, 8)
    assert first.catalog.products == again.catalog.products
    assert first.catalog.products != other.catalog.products
    assert len(first.catalog) == 300


def test_product_ids_and_price_axes() -> None:
    generated = generate_catalog(2000, 1)
    for product in generated.catalog:
        assert re.fullmatch(r"B0[0-9A-Z]{8}", product.asin)
        assert find_leaks(product.asin)  # the project's leak check recognises the shape
        affecting = resolve_sku_price(product.raw_options(), product.pricing, {})
        assert affecting.method != "multiple_price_affecting_axes"
        for values in product.rendered_options().values():
            assert all(value == value.lower() and "/" not in value for value in values)
    sizes = [len(family.members) for family in generated.families]
    assert min(sizes) >= 1 and max(sizes) <= 10


def test_tasks_are_deterministic(env: ShopEnv) -> None:
    again = build_world("test")
    assert [t.instruction for t in again.tasks.values()] == [
        t.instruction for t in env.world.tasks.values()
    ]
    assert split_digests(again.tasks.values()) == split_digests(env.world.tasks.values())
    assert again.version == env.version


def test_splits_are_disjoint_by_product_family_persona_and_instruction(env: ShopEnv) -> None:
    tasks = list(env.world.tasks.values())
    catalog = env.world.catalog
    generated = generate_catalog(len(catalog), 20260830)
    assert generated.catalog.products == catalog.products
    for key in (
        lambda t: t.gold_asin,
        lambda t: generated.family_of[catalog.position(t.gold_asin)],
        lambda t: t.persona_id,
        lambda t: t.instruction_simple,
        lambda t: t.instruction,
    ):
        owner: dict[object, str] = {}
        for task in tasks:
            assert owner.setdefault(key(task), task.split) == task.split
    assert len({t.gold_asin for t in tasks}) == len(tasks)


def test_every_task_is_solvable_and_persona_carries_the_hidden_constraints(env: ShopEnv) -> None:
    for task in env.world.tasks.values():
        gold = env.world.catalog[task.gold_asin]
        breakdown, _ = score_purchase(gold.reward_view(), task.goal(), task.gold_options)
        assert breakdown.r_success == 1, task.task_id
        assert 4 <= len(task.attributes) <= 5 and len(task.instruction_options) <= 2
        persona_text = str(task.persona).casefold()
        for key in task.persona_only:
            kind, _, value = key.partition(":")
            if kind == "attribute":
                assert value in persona_text and value not in task.instruction_simple
            if kind == "option":
                index = task.option_axes.index(value)
                assert task.instruction_options[index] in persona_text
        for attribute in task.attributes:
            assert attribute in task.instruction  # the full instruction states everything
        assert task.gold_asin not in str(task.persona)


def test_budget_is_never_below_the_gold_price() -> None:
    for price in (0.99, 4.99, 19.99, 73.99, 99.99, 499.99, 1234.99):
        for approximate in (False, True):
            amount, ceiling = budget_for(price, approximate)
            assert ceiling >= price and amount > 0
            assert ceiling == (round(amount * 1.1, 8) if approximate else amount)


def test_too_small_catalogue_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        generate_tasks(generate_catalog(100, 0), TaskSettings({"train": 500}))


def test_products_have_no_bullets_and_the_title_as_description() -> None:
    """As in the reference's frozen data (its ENVIRONMENT.md): what search indexes and what
    the attribute reward's text fallback reads."""
    for product in generate_catalog(500, 3).catalog:
        assert product.bullets == () and product.description == product.title
