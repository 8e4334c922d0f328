"""Every vector of cases.json and budget_cases.json, as the spec's section 10 prescribes."""

from __future__ import annotations

import pytest

from shared.runtime.shopsim.reward.cases import evaluate_budget_case, evaluate_case
from shared.runtime.shopsim.reward.title_terms import lexical_title_terms
from tests.shopsim.conftest import load_fixture

CASES = load_fixture("cases.json")
BUDGET_CASES = load_fixture("budget_cases.json")


def test_fixture_sizes() -> None:
    assert len(CASES) == 35
    assert len(BUDGET_CASES) == 28


def _same(expected: object, got: object) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected == got and type(expected) is type(got)
    if isinstance(expected, float):
        return isinstance(got, int | float) and abs(expected - got) <= 1e-9
    return expected == got


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reward_case(case: dict) -> None:
    result = evaluate_case(case)
    expected = {**case.get("derived_expected", {}), **case.get("expected", {})}
    for key, want in expected.items():
        if key == "detail_keys_absent":
            assert not set(want) & set(result["detail"]), key
        elif key == "price_affecting_axes_set":
            assert set(result["price_affecting_axes"]) == set(want)
        else:
            assert _same(want, result[key]), f"{key}: want {want!r}, got {result[key]!r}"
    for text, terms in (case.get("fallback_title_terms") or {}).items():
        assert lexical_title_terms(text) == terms


@pytest.mark.parametrize("case", BUDGET_CASES, ids=[c["name"] for c in BUDGET_CASES])
def test_budget_case(case: dict) -> None:
    result = evaluate_budget_case(case)
    expected = {**case.get("derived_expected", {}), **case.get("expected", {})}
    for key, want in expected.items():
        # Exact comparison, type included: 110.00000000000001 must not be 110.0.
        assert result[key] == want and type(result[key]) is type(want), key
