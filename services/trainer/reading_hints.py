"""Reading hints: generic skill-block texts that change an action but never its outcome.

They answer one question before anything depends on it: does the policy read its skill block?
Each hint asks for a style the shop ignores (ShopSim's search case-folds and ranks a bag of
words, and every option axis must be chosen before `buy now` anyway), so following it changes
what the policy writes and nothing it earns. Two uses:

- the compliance probe (`compliance_probe.py`): the rate at which episodes follow each hint with
  the hint in the skill block against without it, on the same tasks and seeds;
- the optional hint-reading warm start (`[warm_start] reading_hints`): a share of the teacher's
  demonstrations carries one hint in the skill block and acts it out, so SFT shows the policy
  that the block is there to be read. The hints say nothing about what to buy, which query finds
  it or how to check it: they teach reading, never what the bank should say, and a test keeps
  them far (MiniLM cosine < 0.5) from every text the analyst writes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.agents import read_needs
from shared.runtime.shopsim.types import TaskView

_SEARCH = re.compile(r"^search\[(.*)\]$", re.S)
_OPTION = re.compile(r"^click\[([^=\]]+)=[^\]]*\]$")
_STILL_TO_CHOOSE = re.compile(r"^Still to choose: (.*)$", re.M)

# followed(trajectory, view) -> True / False, or None when the episode never reached the point
# where the hint applies (not counted either way).
Detector = Callable[[Trajectory, TaskView], "bool | None"]


@dataclass(frozen=True)
class ReadingHint:
    """One outcome-neutral style: its chunk text, how the teacher acts it, how to detect it."""

    name: str
    content: ChunkContent
    teacher_style: dict[str, Any]
    """Keyword arguments of `HeuristicAgent` that act the hint out."""
    followed: Detector

    def chunk(self) -> InjectedChunk:
        return InjectedChunk(chunk_id=f"reading-hint-{self.name}", version=1, content=self.content)


def first_query(trajectory: Trajectory) -> str | None:
    for step in trajectory.steps:
        match = _SEARCH.match((step.action or "").strip())
        if match:
            return match.group(1).strip()
    return None


def _capitals(trajectory: Trajectory, view: TaskView) -> bool | None:
    query = first_query(trajectory)
    if query is None or not any(char.isalpha() for char in query):
        return None
    return query == query.upper()


def _noun_last(trajectory: Trajectory, view: TaskView) -> bool | None:
    query, noun = first_query(trajectory), read_needs(view).noun
    if query is None or not noun:
        return None
    folded = " ".join(query.casefold().split())
    if noun not in folded or folded == noun:
        return None  # the product word absent, or alone: its place says nothing
    return folded.endswith(noun) and not folded.startswith(noun)


def _last_option_first(trajectory: Trajectory, view: TaskView) -> bool | None:
    """On the first page with two or more axes still to choose, was the last one clicked first?"""
    steps = trajectory.steps
    for before, step in itertools.pairwise(steps):
        missing = _STILL_TO_CHOOSE.search(before.observation or "")
        axes = [axis.strip() for axis in missing.group(1).split(",")] if missing else []
        if len(axes) < 2:
            continue
        clicked = _OPTION.match((step.action or "").strip())
        if clicked is None:
            return None  # left the page (or wrote something else) before choosing
        return clicked.group(1).strip() == axes[-1]
    return None


HINTS: dict[str, ReadingHint] = {
    hint.name: hint
    for hint in (
        ReadingHint(
            "capitals",
            ChunkContent(
                title="Letter case when typing",
                applies_when="You type words into a text box.",
                procedure=["Type every letter as a CAPITAL letter."],
                verify="No small letter appears in what you typed.",
                avoid="Small letters anywhere in what you type.",
            ),
            {"query_style": "upper"},
            _capitals,
        ),
        ReadingHint(
            "noun-last",
            ChunkContent(
                title="Word order when typing",
                applies_when="You type several words into a text box.",
                procedure=[
                    "Type the describing words before the naming word.",
                    "Finish with the naming word.",
                ],
                verify="The naming word is the last word you typed.",
                avoid="Opening with the naming word.",
            ),
            {"query_style": "noun_last"},
            _noun_last,
        ),
        ReadingHint(
            "last-option-first",
            ChunkContent(
                title="Bottom-up clicking",
                applies_when="A page lists two or more choices still open.",
                procedure=["Click the bottom entry of that list first, then work upward."],
                verify="Your first click there was the bottom entry.",
                avoid="Starting at the top entry.",
            ),
            {"reverse_options": True},
            _last_option_first,
        ),
    )
}


def hint_texts() -> list[str]:
    """Every hint as the skill block shows it (for the distance check against analyst texts)."""
    from shared.contracts.chunks import render_chunk

    return [render_chunk(hint.content) for hint in HINTS.values()]
