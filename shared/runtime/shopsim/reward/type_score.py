"""R_type (spec 2): category-part overlap, then the title-term ladder."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.runtime.shopsim.reward.title_terms import TitleTermExtractor, lexical_title_terms

_CATEGORY_SEPARATOR = re.compile(r"\s*(?:›|>|/|\\)\s*")
# Score used when the goal title yields no terms at all.
NO_TERMS_TITLE_SCORE = 0.2


@dataclass(frozen=True)
class TypeScore:
    r_type: float
    category_match: bool
    title_score: float


def category_parts(category: object) -> list[str]:
    """Split on › > / \\ (absorbing whitespace), trim, casefold, drop empties."""
    if category is None:
        return []
    return [
        part.strip().casefold() for part in _CATEGORY_SEPARATOR.split(str(category)) if part.strip()
    ]


def category_match(purchased: object, goal: object) -> bool:
    """At least two distinct shared parts, order and depth ignored."""
    return len(set(category_parts(purchased)) & set(category_parts(goal))) >= 2


def title_score(
    purchased_title: object, goal_title: object, extract: TitleTermExtractor = lexical_title_terms
) -> float:
    """Share of the goal's distinct title terms that the purchased title has (0.2 if none)."""
    desired = set(extract("" if goal_title is None else str(goal_title)))
    if not desired:
        return NO_TERMS_TITLE_SCORE
    purchased = set(extract("" if purchased_title is None else str(purchased_title)))
    return len(purchased & desired) / len(desired)


def type_ladder(is_category_match: bool, score: float) -> float:
    """1.0 / 0.0 / 0.1 / 0.5, first applicable row wins (boundaries are exact doubles)."""
    if is_category_match or score > 0.2:
        return 1.0
    if score == 0:
        return 0.0
    if score < 0.1:
        return 0.1
    return 0.5


def type_reward(
    purchased_category: object,
    purchased_title: object,
    goal_category: object,
    goal_title: object,
    extract: TitleTermExtractor = lexical_title_terms,
) -> TypeScore:
    matched = category_match(purchased_category, goal_category)
    score = title_score(purchased_title, goal_title, extract)
    return TypeScore(type_ladder(matched, score), matched, score)
