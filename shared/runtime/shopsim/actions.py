"""Parsing one action string: `search[query]` or `click[value]`, exactly one per step."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LABELLED = re.compile(r"(?:^|\n)\s*Action\s*:\s*[^\r\n]+", re.IGNORECASE)
_CHAINED = re.compile(r"\]\s*(?:[,;，；]\s*)?(?:search|click)\s*\[", re.IGNORECASE)
_ACTION = re.compile(r"([^\[\]\r\n]+)\[(.*)\]")


@dataclass(frozen=True)
class ParsedAction:
    verb: str  # "search" or "click"; "" when the string did not parse
    argument: str
    error: str | None = None  # a reason code when the string is not one valid action
    message: str = ""


def parse_action(action: object) -> ParsedAction:
    """The verb and argument, or the reason code it fails with (no page state involved)."""
    if not isinstance(action, str) or not action.strip():
        return ParsedAction("", "", "invalid_format", "an action must be a non-empty string")
    text = action.strip()
    if len(_LABELLED.findall(text)) > 1 or _CHAINED.search(text):
        return ParsedAction(
            "", "", "multiple_actions_not_allowed", "one search[...] or click[...] per step"
        )
    match = _ACTION.fullmatch(text)
    if match is None:
        return ParsedAction("", "", "invalid_format", "use search[...] or click[...]")
    verb = match.group(1).strip().casefold()
    if verb not in ("search", "click"):
        return ParsedAction("", "", "invalid_format", "use search[...] or click[...]")
    argument = match.group(2)
    if not argument.strip():
        return ParsedAction(verb, "", "empty_argument", f"{verb}[...] needs a non-empty argument")
    return ParsedAction(verb, argument.strip())
