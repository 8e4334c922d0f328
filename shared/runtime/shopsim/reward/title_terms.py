"""Title terms for R_type (spec 2): the lexical extractor, the reference's fallback path.

spaCy's `zh_core_web_sm` is not a dependency; the lexical path is what an installation without
it computes, and what every fixture flagged `assumes_lexical_title_fallback` expects. A caller
may inject another extractor (a mapping override, as the fixtures' mocked tests do).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

TitleTermExtractor = Callable[[str], Sequence[str]]

# Runs of [a-z0-9] that one of . _ + - / may join; applied to the casefolded text.
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*")
# CJK Unified Ideographs Extension A and the basic block; nothing else counts as Han here.
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")


def lexical_title_terms(text: object) -> list[str]:
    """ASCII tokens, then Han bigrams (a lone Han character is its own term), in order."""
    raw = "" if text is None else str(text)
    terms = _ASCII_TOKEN.findall(raw.casefold())
    for run in _HAN_RUN.findall(raw):
        if len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[index : index + 2] for index in range(len(run) - 1))
    return terms


def override_extractor(
    overrides: Mapping[str, Sequence[str]], fallback: TitleTermExtractor = lexical_title_terms
) -> TitleTermExtractor:
    """An extractor that returns the given terms for these exact strings (mocked tests)."""

    def extract(text: str) -> Sequence[str]:
        if text in overrides:
            return list(overrides[text])
        return fallback(text)

    return extract
