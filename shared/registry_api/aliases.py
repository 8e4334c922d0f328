"""Which alias names are protected: `production` and the names that look like it. The registry
refuses a non-operator's move of one; the evaluator refuses, at submit, a gate that would."""

from __future__ import annotations

import re
import unicodedata

_CONFUSABLES = (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"), ("|", "l"))
_SEPARATORS = re.compile(r"[._\-\s]+")


def skeleton(name: str) -> str:
    """What `name` looks like: case, width, separators and look-alike characters folded."""
    folded = _SEPARATORS.sub("", unicodedata.normalize("NFKC", name).casefold())
    for look_alike, letter in _CONFUSABLES:
        folded = folded.replace(look_alike, letter)
    return folded


def is_protected(name: str, protected_names: list[str]) -> bool:
    """`name` is, or looks like, a protected alias (`production.` and `Pr0duction` included)."""
    return skeleton(name) in {skeleton(protected) for protected in protected_names}
