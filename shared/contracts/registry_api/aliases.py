"""Which alias names are protected: `production` and the names that look like it. The registry
refuses a non-operator's move of one; the evaluator refuses, at submit, a gate that would."""

from __future__ import annotations

import re
import unicodedata

# Characters that read as one another in an alias name (Unicode TR39's confusables among the
# characters a name may hold), folded to one of each class after casefolding (so I is i):
# the thin strokes 1 i l |, the rounds 0 o; then the pairs that read as one letter.
_LOOK_ALIKE_LETTERS = str.maketrans({"1": "l", "i": "l", "|": "l", "0": "o"})
_LOOK_ALIKE_PAIRS = (("rn", "m"), ("vv", "w"), ("cl", "d"))
_SEPARATORS = re.compile(r"[._\-\s]+")


def skeleton(name: str) -> str:
    """What `name` looks like: case, width, separators and look-alike characters folded."""
    folded = _SEPARATORS.sub("", unicodedata.normalize("NFKC", name).casefold())
    folded = folded.translate(_LOOK_ALIKE_LETTERS)
    for pair, letter in _LOOK_ALIKE_PAIRS:
        folded = folded.replace(pair, letter)
    return folded


def is_protected(name: str, protected_names: list[str]) -> bool:
    """`name` is, or looks like, a protected alias (`production.` and `Pr0duction` included)."""
    return skeleton(name) in {skeleton(protected) for protected in protected_names}
