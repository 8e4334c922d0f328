"""Word-level diffs of chunk text, for the bank-diff and chunk pages.

Latin text is split into words and the spaces between them; CJK text (no spaces) into single
characters, so a rewritten Chinese chunk shows the characters that changed, not whole lines.
A procedure is aligned step by step first (each old step paired with the new step most like
it, in order), and only paired steps are diffed word by word: an inserted step no longer
spreads an old step's words across the new numbering.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from shared.contracts.chunks import ChunkContent

_CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"  # kana and CJK ideographs
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|\s+|[^\w\s]")
FIELDS = ("title", "applies_when", "procedure", "verify", "avoid")


@dataclass(frozen=True)
class Piece:
    kind: str  # "same", "added" or "removed"
    text: str


@dataclass(frozen=True)
class StepDiff:
    """One procedure step: its number on each side (None where it has no such side) and its
    text as a word diff (all removed for a dropped step, all added for a new one)."""

    old_number: int | None
    new_number: int | None
    pieces: list[Piece]

    @property
    def kind(self) -> str:
        if self.old_number is None:
            return "added"
        if self.new_number is None:
            return "removed"
        unchanged = all(p.kind == "same" for p in self.pieces)
        return "same" if unchanged and self.old_number == self.new_number else "changed"


@dataclass(frozen=True)
class FieldDiff:
    name: str
    pieces: list[Piece]
    steps: list[StepDiff] | None = None  # the procedure, step by step (then no pieces)

    @property
    def changed(self) -> bool:
        if self.steps is not None:
            return any(step.kind != "same" for step in self.steps)
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


# Two steps are the same step rewritten when at least this share of their words match
# (difflib's ratio over words, spaces left out); below it, one was dropped and one added.
STEP_MATCH = 0.4


def _similarity(old: str, new: str) -> float:
    a = [t for t in tokens(old) if not t.isspace()]
    b = [t for t in tokens(new) if not t.isspace()]
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio() if a or b else 1.0


def align_steps(old: list[str], new: list[str]) -> list[tuple[int | None, int | None]]:
    """(old index, new index) pairs in order, None on the side a step is missing from: the
    order-keeping pairing with the largest total similarity (steps below STEP_MATCH unpaired).
    Procedures are short, so the O(len(old) * len(new)) table is cheap."""
    n, m = len(old), len(new)
    score = [[_similarity(a, b) for b in new] for a in old]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            paired = score[i][j] + best[i + 1][j + 1] if score[i][j] >= STEP_MATCH else -1.0
            best[i][j] = max(paired, best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n or j < m:
        pairing = i < n and j < m and score[i][j] >= STEP_MATCH
        if pairing and best[i][j] == score[i][j] + best[i + 1][j + 1]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
            continue
        if i < n and (j == m or best[i][j] == best[i + 1][j]):
            pairs.append((i, None))
            i += 1
        else:
            pairs.append((None, j))
            j += 1
    return pairs


def step_diff(old: list[str], new: list[str]) -> list[StepDiff]:
    """A procedure's steps aligned (see `align_steps`), each pair diffed word by word."""
    steps = []
    for i, j in align_steps(old, new):
        before = old[i] if i is not None else ""
        after = new[j] if j is not None else ""
        steps.append(
            StepDiff(
                None if i is None else i + 1,
                None if j is None else j + 1,
                word_diff(before, after),
            )
        )
    return steps


def field_text(content: ChunkContent, name: str) -> str:
    """A field as one string; procedure steps numbered one per line, as the prompt shows them."""
    value = getattr(content, name)
    if name == "procedure":
        return "\n".join(f"{i}. {step}" for i, step in enumerate(value, 1))
    return value or ""


def chunk_diff(old: ChunkContent | None, new: ChunkContent | None) -> list[FieldDiff]:
    """Each field of a chunk version against another (None: nothing, as for an added chunk)."""
    diffs = []
    for name in FIELDS:
        if name == "procedure":
            steps = step_diff(
                list(old.procedure) if old is not None else [],
                list(new.procedure) if new is not None else [],
            )
            diffs.append(FieldDiff(name, [], steps))
            continue
        before = field_text(old, name) if old is not None else ""
        after = field_text(new, name) if new is not None else ""
        diffs.append(FieldDiff(name, word_diff(before, after)))
    return diffs
