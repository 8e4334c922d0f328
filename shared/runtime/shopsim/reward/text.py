"""Shared text primitives of the reward: case folding and the fuzzy token-set ratio (spec 1)."""

from __future__ import annotations

import functools
import re
import unicodedata
from difflib import SequenceMatcher

# A match needs a ratio strictly above this (86 matches, 85 does not).
MATCH_THRESHOLD = 85

# Python's Unicode \w is exactly "isalnum() or underscore", the spec's word character.
_NON_WORD_RUN = re.compile(r"\W+")


def fuzzy_tokens(value: object) -> frozenset[str]:
    """The token set of spec 1.2 step 1: casefold, non-word runs become spaces, split."""
    return frozenset(_NON_WORD_RUN.sub(" ", str(value).casefold()).split())


def _ratio(first: str, second: str) -> int:
    # difflib's Ratcliff/Obershelp on code points; round() is half-to-even on the double.
    return round(100 * SequenceMatcher(None, first, second).ratio())


def token_set_ratio(product_side: object, goal_side: object) -> int:
    """The reference's own token-set ratio (not fuzzywuzzy's): whole sets sorted and joined."""
    return _token_set_ratio(str(product_side), str(goal_side))


@functools.lru_cache(maxsize=1 << 17)
def _token_set_ratio(product_side: str, goal_side: str) -> int:
    # Memoized: attribute and option strings recur across episodes, and the result is a pure
    # function of the two strings.
    left, right = fuzzy_tokens(product_side), fuzzy_tokens(goal_side)
    common = left & right
    if (common and common in (left, right)) or left == right:
        # One set contains the other: the joined intersection equals one joined side, so
        # r = 100 (equal sets, the empty pair included, also give 100: ratio("", "") is 1.0).
        return 100
    joined_common = " ".join(sorted(common))
    joined_left = " ".join(sorted(left))
    joined_right = " ".join(sorted(right))
    if not common:
        return _ratio(joined_left, joined_right)
    return max(
        _ratio(joined_common, joined_left),
        _ratio(joined_common, joined_right),
        _ratio(joined_left, joined_right),
    )


def fuzzy_match(product_side: object, goal_side: object) -> bool:
    """True when the token-set ratio is strictly above 85."""
    return token_set_ratio(product_side, goal_side) > MATCH_THRESHOLD


def normalize_option_text(value: object) -> str:
    """Spec 1.3, price lookup only: NFKC, casefold, `/` to `|`, no whitespace; null gives ''."""
    if value is None:
        return ""
    text = unicodedata.normalize("NFKC", str(value)).casefold().replace("/", "|")
    return "".join(text.split())


def render_option_value(value: object) -> str:
    """How the live site shows (and the agent selects) an option value: `/` as ` | `,
    lowercased, whitespace runs collapsed, so `S / 均码` becomes `s | 均码` (spec 4 and 5.5).
    Neither R_opt nor the price lookup sees the difference: both ignore spacing."""
    return " ".join(str(value).replace("/", " | ").lower().split())
