"""Word-level diffs of chunk text, for the bank-diff and chunk pages.

Latin text is split into words and the spaces between them; CJK text (no spaces) into single
characters, so a rewritten Chinese chunk shows the characters that changed, not whole lines.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from shared.chunks import ChunkContent

_CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"  # kana and CJK ideographs
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|\s+|[^\w\s]")
FIELDS = ("title", "applies_when", "procedure", "verify", "avoid")


@dataclass(frozen=True)
class Piece:
    kind: str  # "same", "added" or "removed"
    text: str


@dataclass(frozen=True)
class FieldDiff:
    name: str
    pieces: list[Piece]

    @property
    def changed(self) -> bool:
        return any(piece.kind != "same" for piece in self.pieces)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def word_diff(old: str, new: str) -> list[Piece]:
    """`old` -> `new` as runs of unchanged, removed and added words."""
    a, b = tokens(old), tokens(new)
    pieces: list[Piece] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pieces.append(Piece("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(Piece("removed", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(Piece("added", "".join(b[j1:j2])))
    return pieces


def field_text(content: ChunkContent, name: str) -> str:
    """A field as one string; procedure steps numbered one per line, as the prompt shows them."""
    value = getattr(content, name)
    if name == "procedure":
        return "\n".join(f"{i}. {step}" for i, step in enumerate(value, 1))
    return value or ""


def chunk_diff(old: ChunkContent | None, new: ChunkContent | None) -> list[FieldDiff]:
    """Each field of a chunk version against another (None: nothing, as for an added chunk)."""
    return [
        FieldDiff(
            name,
            word_diff(
                field_text(old, name) if old is not None else "",
                field_text(new, name) if new is not None else "",
            ),
        )
        for name in FIELDS
    ]
