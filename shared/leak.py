"""The leak check: deployable skill text must not carry product ids, task ids or gold facts.

One function serves the registry (on every chunk version it stores) and the analyst's gold
firewall (which passes the gold-derived terms it knows). Findings name the rule and the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# ASIN-like ids (ShopSim and Amazon both use B0 + 8 upper-case alphanumerics), the word "ASIN"
# itself, runs of 10+ digits (order, phone or product numbers) and task ids like task-000123.
_PATTERNS: dict[str, re.Pattern[str]] = {
    "asin_word": re.compile(r"\basin\b", re.IGNORECASE),
    "product_id": re.compile(r"(?<![0-9A-Za-z])B0[0-9A-Z]{8}(?![0-9A-Za-z])"),
    "long_digit_run": re.compile(r"\d{10,}"),
    "task_id": re.compile(r"task[-_ ]?\d+", re.IGNORECASE),
}

# Minimum lengths below which a gold term is too generic to count as a leak.
MIN_TERM_CHARS = {"title": 6, "brand": 3, "option": 6}


@dataclass(frozen=True)
class LeakFinding:
    rule: str
    text: str


def find_leaks(text: str, *, gold_terms: Iterable[tuple[str, str]] = ()) -> list[LeakFinding]:
    """Every leak in `text`: fixed patterns, plus `gold_terms` given as (kind, term) pairs.

    Kinds `title`, `brand` and `option` only count from 6, 3 and 6 characters; other kinds
    always count. Terms match case-insensitively as plain substrings.
    """
    findings = [
        LeakFinding(rule, match.group(0))
        for rule, pattern in _PATTERNS.items()
        for match in pattern.finditer(text)
    ]
    folded = text.casefold()
    for kind, term in gold_terms:
        term = term.strip()
        if len(term) >= MIN_TERM_CHARS.get(kind, 1) and term.casefold() in folded:
            findings.append(LeakFinding(f"gold_{kind}", term))
    return findings
