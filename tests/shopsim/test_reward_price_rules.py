"""Spec 5, rule by rule: what counts as a price (5.3), each resolution row with the diagnostics
it reports (status, method, price axis, price-affecting axes), the explicit price of 5.2 path 2,
and the ceiling check of 5.1 (only a verifiable price can pass)."""

from __future__ import annotations

import math

import pytest

from shared.runtime.shopsim.reward import price_reward, resolve_sku_price
from shared.runtime.shopsim.reward.price import (
    PriceResolution,
    explicit_price_resolution,
    valid_price,
)

COLOUR = "颜色分类"
OPTIONS = {
    COLOUR: [{"value": "白色", "price": 10}, {"value": "黑色", "price": 20}],
    "尺码": [{"value": "S / 均码", "price": None}],
}


def _summary(resolution: PriceResolution) -> tuple:
    return (
        resolution.status,
        resolution.price,
        resolution.method,
        resolution.price_axis,
        resolution.price_affecting_axes,
    )


@pytest.mark.parametrize(
    ("value", "price"),
    [(0, 0.0), (0.5, 0.5), ("12.5", 12.5), (-0.01, None), (math.inf, None), (math.nan, None),
     ("cheap", None), (None, None)],
)  # fmt: skip
def test_a_price_is_a_finite_number_at_least_zero(value, price):
    assert valid_price(value) == price


def test_row_0_a_selection_that_is_not_a_mapping():
    assert _summary(resolve_sku_price(OPTIONS, [10], ["白色"])) == (
        "unverifiable", None, "invalid_selected_options", None, (),
    )  # fmt: skip


def test_row_2_reports_the_price_axis_whatever_the_outcome():
    unselected = resolve_sku_price(OPTIONS, [], {"尺码": "s | 均码"})
    assert _summary(unselected) == (
        "unverifiable", None, "price_axis_unselected", COLOUR, (COLOUR,),
    )  # fmt: skip
    missing = resolve_sku_price(OPTIONS, [], {COLOUR: "红色"})
    assert _summary(missing) == (
        "unverifiable", None, "selected_variant_price_missing", COLOUR, (COLOUR,),
    )  # fmt: skip
    chosen = resolve_sku_price(OPTIONS, [], {COLOUR: "黑色"})
    assert _summary(chosen) == ("pass", 20.0, "selected_price_axis", COLOUR, (COLOUR,))


def test_entries_that_are_not_mappings_are_skipped_not_the_end_of_the_axis():
    options = {"a": ["junk", {"value": "x", "price": 5}, 7, {"value": "y", "price": 9}]}
    assert resolve_sku_price(options, [], {"a": "y"}).price == 9.0


@pytest.mark.parametrize(
    ("given", "expected"),
    [(12, ("pass", 12.0)), (0, ("pass", 0.0)), (-1, ("unverifiable", None)),
     (math.nan, ("unverifiable", None)), (None, ("unverifiable", None))],
)  # fmt: skip
def test_explicit_price_path(given, expected):
    resolution = explicit_price_resolution(given)
    assert (resolution.status, resolution.price, resolution.method) == (*expected, "explicit_price")


def test_an_unverifiable_price_never_passes_a_ceiling():
    # Spec 5.1: R_price = 1 only for a verifiable ("pass") price; a number alone is not enough.
    assert price_reward(PriceResolution("unverifiable", 50.0, "x"), 100.0) == 0.0
    assert price_reward(PriceResolution("pass", 50.0, "x"), 100.0) == 1.0
