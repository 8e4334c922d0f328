"""Aggregates (spec 6 and 7): R_loose, R_strict, R_success and the verbose detail."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.runtime.shopsim.reward.attributes import attribute_reward, searchable_text
from shared.runtime.shopsim.reward.options import option_reward, required_option_values
from shared.runtime.shopsim.reward.price import (
    PriceResolution,
    explicit_price_resolution,
    price_reward,
    resolve_sku_price,
)
from shared.runtime.shopsim.reward.title_terms import TitleTermExtractor, lexical_title_terms
from shared.runtime.shopsim.reward.type_score import type_reward
from shared.runtime.shopsim.types import RewardBreakdown, TerminationReason

REWARD_VERSION = "shopsimulator-paper-reward-v2"


@dataclass(frozen=True)
class RewardGoal:
    """The private goal: the gold product's title and category, the required attributes and
    option values, and the effective price ceiling (tolerance already folded in)."""

    asin: str
    name: str
    category: str
    attributes: tuple[str, ...]
    goal_options: Any = ()  # a list, a mapping or a scalar, as the reference accepts
    price_upper: float | None = None


@dataclass(frozen=True)
class RewardProduct:
    """The purchased catalogue record as the reward reads it; `options` are the raw
    customization options, axis -> [{"value": ..., "price": ...}]."""

    asin: str
    title: str
    category: str
    attributes: tuple[str, ...] = ()
    bullets: tuple[str, ...] = ()
    description: str = ""
    options: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    pricing: tuple[float, ...] = ()


def score_purchase(
    product: RewardProduct,
    goal: RewardGoal,
    selected_options: object,
    *,
    price_resolution: PriceResolution | None = None,
    explicit_price: object = None,
    title_terms: TitleTermExtractor = lexical_title_terms,
) -> tuple[RewardBreakdown, PriceResolution]:
    """The reward at `buy now`. The price comes from `price_resolution` if given, else from
    `explicit_price` if given, else from SKU resolution (spec 5.2)."""
    if price_resolution is None:
        if explicit_price is not None:
            price_resolution = explicit_price_resolution(explicit_price)
        else:
            price_resolution = resolve_sku_price(product.options, product.pricing, selected_options)
    r_price = price_reward(price_resolution, goal.price_upper)
    type_score = type_reward(product.category, product.title, goal.category, goal.name, title_terms)
    text = searchable_text(product.title, product.bullets, product.description)
    r_att, m_att = attribute_reward(goal.attributes, product.attributes, text)
    r_opt, m_opt = option_reward(selected_options, goal.goal_options)
    n_att = len(goal.attributes)
    n_opt = len(required_option_values(goal.goal_options))
    r_type = type_score.r_type
    r_loose = r_type * (m_att + m_opt + r_price) / (n_att + n_opt + 1)
    r_strict = r_type * r_att * r_opt * r_price
    success = int(r_type == 1.0 and r_att == 1.0 and r_opt == 1.0 and r_price == 1.0)
    breakdown = RewardBreakdown(
        r_type=r_type,
        r_att=r_att,
        r_option=r_opt,
        r_price=r_price,
        r_loose=r_loose,
        r_strict=r_strict,
        r_success=success,
        num_attr_matches=m_att,
        num_option_matches=m_opt,
        category_match=type_score.category_match,
        title_score=type_score.title_score,
        target_asin_match=str(product.asin) == str(goal.asin),
        price_verifiable=price_resolution.verifiable,
        price_status=price_resolution.status,
        resolved_price=price_resolution.price,
        price_method=price_resolution.method,
        termination_reason="purchase",
    )
    return breakdown, price_resolution


def no_purchase_breakdown(reason: TerminationReason) -> RewardBreakdown:
    """Spec 7: every component zero, r_success 0, the diagnostics false."""
    return RewardBreakdown(
        r_type=0.0,
        r_att=0.0,
        r_option=0.0,
        r_price=0.0,
        r_loose=0.0,
        r_strict=0.0,
        r_success=0,
        termination_reason=reason,
    )


def reward_detail(
    breakdown: RewardBreakdown,
    price_upper: float | None = None,
    price_resolution: PriceResolution | None = None,
) -> dict[str, Any]:
    """The verbose detail of spec 6 (purchase) or 7 (no purchase); never query_match,
    reward_type or weighted_score."""
    detail: dict[str, Any] = {
        "reward_version": REWARD_VERSION,
        "termination_reason": breakdown.termination_reason,
        "r_loose": breakdown.r_loose,
        "r_strict": breakdown.r_strict,
        "r_success": breakdown.r_success,
        "r_type": breakdown.r_type,
        "r_att": breakdown.r_att,
        "r_option": breakdown.r_option,
        "r_price": breakdown.r_price,
        "target_asin_match": breakdown.target_asin_match,
        "price_verifiable": breakdown.price_verifiable,
    }
    if breakdown.termination_reason == "purchase":
        detail.update(
            category_match=breakdown.category_match,
            title_score=breakdown.title_score,
            num_attr_matches=breakdown.num_attr_matches,
            num_option_matches=breakdown.num_option_matches,
            price_upper=price_upper,
            price_resolution=price_resolution.as_dict() if price_resolution else None,
        )
    return detail
