"""R_att (spec 3): each goal attribute matches a product attribute fuzzily, or is a plain
substring of the casefolded title + bullets + description."""

from __future__ import annotations

from collections.abc import Sequence

from shared.runtime.shopsim.reward.text import fuzzy_match


def searchable_text(title: object, bullets: Sequence[object], description: object) -> str:
    """Title, one space, bullets joined by spaces, one space, description; casefolded."""
    parts = [
        "" if title is None else str(title),
        " ".join(str(bullet) for bullet in bullets),
        "" if description is None else str(description),
    ]
    return " ".join(parts).casefold()


def attribute_matches(
    goal_attributes: Sequence[object],
    product_attributes: Sequence[object],
    text: str,
) -> list[bool]:
    """Per goal attribute (duplicates count separately): matched or not."""
    # The substring test is cheap, so it goes first; the outcome is the same "or".
    return [
        str(required).casefold() in text
        or any(fuzzy_match(actual, required) for actual in product_attributes)
        for required in goal_attributes
    ]


def attribute_reward(
    goal_attributes: Sequence[object],
    product_attributes: Sequence[object],
    text: str,
) -> tuple[float, int]:
    """(R_att, M_att); no goal attributes gives (1.0, 0)."""
    if not goal_attributes:
        return 1.0, 0
    matched = sum(attribute_matches(goal_attributes, product_attributes, text))
    return matched / len(goal_attributes), matched
