"""Reward test vectors in the fixture format of spec 10 (`cases.json`, `budget_cases.json`):
evaluation for the tests and for `intraskill env reward-cases`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.runtime.shopsim.reward.budget import (
    annotation_price_upper,
    explicit_budget_from_instruction,
    goal_price_upper,
    resolve_annotations,
)
from shared.runtime.shopsim.reward.score import (
    RewardGoal,
    RewardProduct,
    no_purchase_breakdown,
    reward_detail,
    score_purchase,
)
from shared.runtime.shopsim.reward.title_terms import lexical_title_terms, override_extractor

# The keys `reward-cases --json` prints, in order, after `name`.
CASE_OUTPUT_KEYS = (
    "r_type", "r_att", "r_option", "r_price", "r_loose", "r_strict", "r_success",
    "num_attr_matches", "num_option_matches", "category_match", "title_score",
    "price_status", "resolved_price", "price_method", "price_verifiable", "target_asin_match",
)  # fmt: skip


class CaseError(ValueError):
    """A vector that does not follow the fixture format."""


def _goal(raw: Mapping[str, Any]) -> RewardGoal:
    return RewardGoal(
        asin=str(raw.get("asin", "")),
        name=str(raw.get("title") or ""),
        category=str(raw.get("category") or ""),
        attributes=tuple(raw.get("attributes") or ()),
        goal_options=raw.get("instruction_options"),
        price_upper=None if raw.get("price_upper") is None else float(raw["price_upper"]),
    )


def _product(raw: Mapping[str, Any]) -> RewardProduct:
    return RewardProduct(
        asin=str(raw.get("asin", "")),
        title=str(raw.get("title") or ""),
        category=str(raw.get("category") or ""),
        attributes=tuple(raw.get("attributes") or ()),
        bullets=tuple(raw.get("bullets") or ()),
        description=str(raw.get("description") or ""),
        options=dict(raw.get("options") or {}),
        pricing=tuple(raw.get("pricing") or ()),
    )


def evaluate_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the reward computes for one `cases.json` vector (detail included)."""
    name = case.get("name", "?")
    if case.get("kind") == "no_purchase":
        breakdown = no_purchase_breakdown(case.get("termination_reason", "action_limit"))
        result: dict[str, Any] = {"name": name}
        result.update({key: getattr(breakdown, key) for key in CASE_OUTPUT_KEYS})
        result.update(
            price_status="unverifiable",
            resolved_price=None,
            price_method=None,
            reward=breakdown.reward,
            price_axis=None,
            price_affecting_axes=[],
            detail=reward_detail(breakdown),
        )
        return result
    if not isinstance(case.get("goal"), Mapping) or not isinstance(case.get("product"), Mapping):
        raise CaseError(f"case {name!r}: a purchase needs `goal` and `product` objects")
    extractor = lexical_title_terms
    if case.get("title_terms_override"):
        extractor = override_extractor(case["title_terms_override"])
    goal = _goal(case["goal"])
    breakdown, resolution = score_purchase(
        _product(case["product"]),
        goal,
        case.get("selected_options", {}),
        explicit_price=case.get("explicit_price"),
        title_terms=extractor,
    )
    result = {"name": name}
    result.update({key: getattr(breakdown, key) for key in CASE_OUTPUT_KEYS})
    result.update(
        reward=breakdown.reward,
        price_axis=resolution.price_axis,
        price_affecting_axes=list(resolution.price_affecting_axes),
        detail=reward_detail(breakdown, goal.price_upper, resolution),
    )
    return result


def case_output(case: Mapping[str, Any]) -> dict[str, Any]:
    """The one-line JSON object `reward-cases --json` prints for a vector."""
    full = evaluate_case(case)
    return {"name": full["name"], **{key: full[key] for key in CASE_OUTPUT_KEYS}}


def evaluate_budget_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """What the budget code computes for one `budget_cases.json` vector."""
    function, given = case.get("function"), case.get("input") or {}
    if function == "explicit_budget_from_instruction":
        return {"price_upper": explicit_budget_from_instruction(given.get("text"))}
    if function == "get_goals":
        simple = given.get("instruction_simple") or given.get("instruction")
        return {
            "price_upper": goal_price_upper(
                given.get("instruction"), given.get("instruction_simple"), given.get("price_upper")
            ),
            "instruction_simple": simple,
            "user_persona": dict(given.get("user_persona") or {}),
            "reason_key": given.get("reason_key"),
            "task_id": given.get("task_id"),
            "task_uid": given.get("task_uid"),
        }
    if function == "validate_annotation":
        note = given.get("annotation") or {}
        raw_amount = note.get("amount")
        return {
            "amount": None if raw_amount is None else float(raw_amount),
            "price_upper": annotation_price_upper(str(note.get("kind")), raw_amount),
        }
    if function == "resolve_persona_annotations":
        return {"price_upper": resolve_annotations(given.get("annotations") or {})}
    raise CaseError(f"budget case {case.get('name')!r}: unknown function {function!r}")
