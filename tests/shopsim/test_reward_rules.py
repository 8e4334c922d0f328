"""One or more tests per reward rule (spec sections 1-8), beyond the fixture vectors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.runtime.shopsim.reward import (
    RewardGoal,
    RewardProduct,
    explicit_budget_from_instruction,
    goal_price_upper,
    no_purchase_breakdown,
    price_reward,
    resolve_sku_price,
    reward_detail,
    score_purchase,
    token_set_ratio,
)
from shared.runtime.shopsim.reward.attributes import attribute_reward, searchable_text
from shared.runtime.shopsim.reward.budget import (
    BudgetError,
    annotation_price_upper,
    chinese_numeral_value,
)
from shared.runtime.shopsim.reward.options import option_reward, required_option_values
from shared.runtime.shopsim.reward.price import PriceResolution
from shared.runtime.shopsim.reward.text import fuzzy_match, fuzzy_tokens, normalize_option_text
from shared.runtime.shopsim.reward.title_terms import lexical_title_terms
from shared.runtime.shopsim.reward.type_score import category_match, category_parts, type_ladder


# -- 1. text primitives ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "score"),
    [
        ("深海blue色", "天空blue款", 57),
        ("M", "M码", 67),
        ("ＸＬ", "XL", 0),
        ("白色", "白色（加绒款）", 100),
        ("-", "/", 100),
        ("超长续航", "长续航", 86),
        ("超轻透气网面女式跑步运动鞋", "超轻透气网面男士跑步运动鞋", 85),
        ("Black", "black", 100),
    ],
)
def test_token_set_ratio_spec_examples(a: str, b: str, score: int) -> None:
    assert token_set_ratio(a, b) == score


def test_match_is_strictly_above_85() -> None:
    assert fuzzy_match("超长续航", "长续航")
    assert not fuzzy_match("超轻透气网面女式跑步运动鞋", "超轻透气网面男士跑步运动鞋")


def test_tokens_split_on_non_word_runs_and_keep_cjk_runs_whole() -> None:
    assert fuzzy_tokens("深海blue色") == {"深海blue色"}
    assert fuzzy_tokens("白色（加绒款）") == {"白色", "加绒款"}
    assert fuzzy_tokens("Straße / S|M") == {"strasse", "s", "m"}


def test_sorted_union_layout_not_fuzzywuzzy() -> None:
    # Spec 1.2 step 2 sorts all of A: sA = "a b", sB = "b ba", sI = "b". r(sI, sA) = 2·1/4 = 50,
    # r(sI, sB) = 2·1/5 = 40, and r(sA, sB) matches only the block " b": 2·2/7 = 57.
    # fuzzywuzzy's "intersection + remainder" layout would compare "b a" with "b ba", which
    # match on "b " and "a": 2·3/7 = 86, a match. The two layouts disagree on the verdict.
    assert token_set_ratio("a b", "b ba") == 57
    assert not fuzzy_match("a b", "b ba")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.text(max_size=12), st.text(max_size=12))
def test_ratio_is_bounded_and_identity_is_100(a: str, b: str) -> None:
    assert 0 <= token_set_ratio(a, b) <= 100
    assert token_set_ratio(a, a) == 100


def test_option_norm_is_nfkc_casefold_pipe_no_space() -> None:
    assert normalize_option_text("S / 均码") == "s|均码"
    assert normalize_option_text("ＸＬ") == "xl"
    assert normalize_option_text(None) == ""


# -- 2. R_type --------------------------------------------------------------------------------
def test_category_parts_and_match() -> None:
    assert category_parts("Home \\ Kitchen / Cookware") == ["home", "kitchen", "cookware"]
    assert category_parts(" a ›  b >c ") == ["a", "b", "c"]
    assert category_parts(None) == []
    assert category_match("Home \\ Kitchen / Cookware", "kitchen›HOME›knives")
    assert not category_match("家电 > 厨房电器 > 电饭煲", "家电›清洁电器›洗地机")


def test_lexical_title_terms() -> None:
    assert lexical_title_terms("USB 3.0 wi-fi a/b") == ["usb", "3.0", "wi-fi", "a/b"]
    assert lexical_title_terms("café") == ["caf"]
    assert lexical_title_terms("ＸＬ") == []
    assert lexical_title_terms("カタカナ 한국") == []
    assert lexical_title_terms("盘") == ["盘"]
    assert lexical_title_terms("洗地机") == ["洗地", "地机"]


@pytest.mark.parametrize(
    ("matched", "score", "expected"),
    [(True, 0.0, 1.0), (False, 0.21, 1.0), (False, 0.0, 0.0), (False, 0.05, 0.1),
     (False, 0.1, 0.5), (False, 0.2, 0.5), (False, 1 / 10, 0.5), (False, 1 / 5, 0.5)],
)  # fmt: skip
def test_type_ladder(matched: bool, score: float, expected: float) -> None:
    assert type_ladder(matched, score) == expected


# -- 3. R_att ----------------------------------------------------------------------------------
def test_attribute_substring_spans_field_joins_and_duplicates_count() -> None:
    text = searchable_text("Title End", ["bullet"], "Desc")
    assert text == "title end bullet desc"
    assert attribute_reward(["end bullet", "x", "x"], [], text) == (1 / 3, 1)
    assert attribute_reward([], ["anything"], text) == (1.0, 0)


def test_attribute_direct_fuzzy_match() -> None:
    assert attribute_reward(["长续航"], ["超长续航"], "") == (1.0, 1)


# -- 4. R_opt ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("goal", "values"),
    [({"颜色": "黑", "尺码": "XL"}, ["黑", "XL"]), (["a", ""], ["a", ""]), ("x", ["x"]),
     (None, []), ("", []), (7, ["7"]), (("a",), ["a"])],
)  # fmt: skip
def test_required_option_values(goal: object, values: list[str]) -> None:
    assert required_option_values(goal) == values


def test_option_reward_ignores_axes_and_non_mapping_selection() -> None:
    assert option_reward({"any axis": "白色"}, ["白色"]) == (1.0, 1)
    assert option_reward(["白色"], ["白色"]) == (0.0, 0)
    assert option_reward({"a": "s | 均码"}, ["S / 均码"]) == (1.0, 1)
    assert option_reward({}, []) == (1.0, 0)


# -- 5. R_price --------------------------------------------------------------------------------
OPTS = {
    "颜色分类": [{"value": "白色", "price": 10}, {"value": "黑色", "price": 20}],
    "尺码": [{"value": "S / 均码", "price": None}],
}


def test_price_resolution_rows() -> None:
    assert resolve_sku_price(OPTS, [10], ["白色"]).method == "invalid_selected_options"
    chosen = resolve_sku_price(OPTS, [10], {"颜色分类": "黑色", "尺码": "s | 均码"})
    assert (chosen.status, chosen.price, chosen.method) == ("pass", 20.0, "selected_price_axis")
    assert resolve_sku_price(OPTS, [10], {"颜色分类": "ＷＨＩＴＥ"}).method == (
        "selected_variant_price_missing"
    )
    assert resolve_sku_price({}, [5, 5.0], {}).method == "single_listing_price"
    assert resolve_sku_price({}, [5, 6], {}).method == "price_not_deterministic"
    assert resolve_sku_price({"a": [{"value": "x", "price": None}]}, [5], {}).status == (
        "unverifiable"
    )


def test_later_duplicate_entry_wins_and_invalid_prices_are_null() -> None:
    options = {
        "a": [{"value": "X", "price": 5}, {"value": "x", "price": 9}, {"value": "y", "price": -1}]
    }
    assert resolve_sku_price(options, [], {"a": "x"}).method == "constant_option_price"
    assert resolve_sku_price(options, [], {"a": "x"}).price == 9.0


def test_fullwidth_value_finds_its_price_but_fails_the_option_match() -> None:
    options = {"尺码": [{"value": "XL", "price": 30}, {"value": "M", "price": 20}]}
    assert resolve_sku_price(options, [], {"尺码": "ＸＬ"}).price == 30.0
    assert option_reward({"尺码": "ＸＬ"}, ["XL"]) == (0.0, 0)


def test_price_reward() -> None:
    # Spec 5.1: the price must be ≤ price_upper (inclusive), so exact equality passes.
    passed = PriceResolution("pass", 110.0, "x")
    assert price_reward(passed, 110.0) == 1.0
    assert price_reward(passed, 110.00000000000001) == 1.0
    assert price_reward(passed, 109.99) == 0.0
    assert price_reward(PriceResolution("pass", 0.0, "x"), 0.0) == 1.0
    assert price_reward(PriceResolution("unverifiable", None, "x"), None) == 1.0
    assert price_reward(PriceResolution("unverifiable", None, "x"), 1e9) == 0.0


# -- 6/7. aggregates -----------------------------------------------------------------------------
def test_loose_denominator_and_success_need_every_component() -> None:
    product = RewardProduct("p", "t", "a›b", ("x",), options={}, pricing=(50.0,))
    goal = RewardGoal("g", "t", "a›b", ("x", "y"), ["z"], 40.0)
    breakdown, resolution = score_purchase(product, goal, {})
    assert resolution.price == 50.0
    assert breakdown.r_loose == pytest.approx(1.0 * (1 + 0 + 0.0) / (2 + 1 + 1))
    assert breakdown.r_strict == 0.0 and breakdown.r_success == 0
    assert not breakdown.target_asin_match


def test_no_purchase_breakdown_is_all_zero() -> None:
    breakdown = no_purchase_breakdown("generation_length")
    assert breakdown.components() == dict.fromkeys(breakdown.components(), 0.0)
    detail = reward_detail(breakdown)
    assert detail["termination_reason"] == "generation_length"
    assert not {"reward_type", "graceful_stop", "early_abstain"} & set(detail)


# -- 8. budgets ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [("一二", 12.0), ("一千八", 1800.0), ("两万五", 25000.0), ("七十", 70.0), ("十", 10.0),
     ("三百零五", 305.0), ("一万二千", 12000.0)],
)  # fmt: skip
def test_chinese_numerals(text: str, value: float) -> None:
    assert chinese_numeral_value(text) == value


@pytest.mark.parametrize(
    ("text", "upper"),
    [("价格低于0元", None), ("预算至少500元", None), ("大约200块", 200 * 1.1),
     ("二十几块", 29.0), ("要个位数价格的", 9.0), ("3000左右的预算", 3000 * 1.1),
     ("五千左右", 5000 * 1.1), ("100以内能拿下", 100.0), ("准备了300元", 300.0),
     ("300元左右的", 300 * 1.1), ("预算2k", 2000.0), ("预算别超过1,500元", 1500.0),
     ("随便买点", None)],
)  # fmt: skip
def test_budget_parser_rules(text: str, upper: float | None) -> None:
    assert explicit_budget_from_instruction(text) == upper


def test_goal_price_upper_precedence_and_errors() -> None:
    assert goal_price_upper("预算100元", None, "80") == 80.0
    assert goal_price_upper("预算100元", "", None) == 100.0
    with pytest.raises(BudgetError):
        goal_price_upper("x", None, -1)
    with pytest.raises(BudgetError):
        goal_price_upper("x", None, math.nan)
    assert annotation_price_upper("approximate_upper", 100) == 110.0
    assert annotation_price_upper("lower_only", 100) is None


def _plain_token_set_ratio(a: str, b: str) -> int:
    """The spec's definition written out, without the fast paths or the cache."""
    import re
    from difflib import SequenceMatcher

    def tokens(value: str) -> set[str]:
        return set(re.sub(r"\W+", " ", value.casefold()).split())

    left, right = tokens(a), tokens(b)
    common = left & right
    joined = [" ".join(sorted(part)) for part in (common, left, right)]

    def ratio(x: str, y: str) -> int:
        return round(100 * SequenceMatcher(None, x, y).ratio())

    if not common:
        return ratio(joined[1], joined[2])
    return max(
        ratio(joined[0], joined[1]), ratio(joined[0], joined[2]), ratio(joined[1], joined[2])
    )


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text("ab 白色-/XxＸ_", max_size=9), st.text("ab 白色-/XxＸ_", max_size=9))
def test_fast_paths_and_cache_match_the_plain_definition(a: str, b: str) -> None:
    assert token_set_ratio(a, b) == _plain_token_set_ratio(a, b)
