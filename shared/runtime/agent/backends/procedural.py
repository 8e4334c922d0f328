"""The `procedural` policy: a TEST DOUBLE for a model, never a model.

A seeded ShopSim agent behind the `PolicyBackend` interface. It reads only what a model would:
the system message (persona document and skill block), the task line and the pages. It follows
the procedures of the skill chunks it recognises, by title, and nothing else; without them it
shops naively (searches the product noun, opens the first result, takes each axis's first
value, buys). That gives the slow loop a policy whose failures have known causes and whose
successes a chunk can switch on: the planted effect the analyst tests run against, and a fast
stand-in for end-to-end runs of the whole loop.

Mechanisms it recognises (a chunk whose title carries one of the cue groups turns it on):

| key | behaviour when recognised |
| --- | --- |
| explicit_query | the query adds the instruction's explicit attributes to the product noun |
| persona_constraints | the profile's notes for this product type add attributes, options, budget |
| inspect_candidates | open results by coverage, go back when the page lacks a required attribute |
| option_choice | pick the option values the request (and profile, if read) names |
| complete_options | set every option axis before buy now (else only the first, then loop) |
| price_check | go back when the selected variant's price exceeds the known budget |

Randomness, all seeded by the request seeds: with probability `slip` per results page it opens
a random result instead, so siblings of one GRPO group can differ; with probability
`competence` per episode and mechanism it follows that mechanism unprompted, like a base model
that sometimes shops well on its own (default 0: only the skill block switches mechanisms on).
`turn_delay_s` makes each turn take that long, like a model's latency (the service tests that
stop a server mid-job need a job that is still running).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.protocols import ToolCall

# Title cues per mechanism: a chunk title containing every phrase of any one group (casefolded)
# switches the mechanism on. English and Chinese, as the banks are written in either.
MECHANISM_CUES: dict[str, tuple[tuple[str, ...], ...]] = {
    "explicit_query": (("query", "explicit"), ("query", "constraint"), ("搜索", "约束")),
    "persona_constraints": (("persona",), ("profile",), ("用户", "文档"), ("画像",)),
    "inspect_candidates": (("candidate", "inspect"), ("candidate", "attribute"), ("候选", "核验")),
    "option_choice": (("option value",), ("pick the variant",), ("选项", "取值")),
    "complete_options": (("every option axis",), ("all option axes",), ("选项维度",)),
    "price_check": (("price", "budget"), ("价格", "预算")),
}
MECHANISMS = tuple(MECHANISM_CUES)

_SKILL = re.compile(r"<skill [^>]*>\s*###\s*(.+?)\n", re.S)
_OPENER = re.compile(
    r"^(?:i'm looking for|i need|help me find|i want to buy|please find me)\s+(?:an?\s+)?"
    r"(.+?)(?:\s+with\s+|\.)",
    re.I,
)
_RESULT = re.compile(r"^\d+\. (\S+) \| (.*) \| (.*)$", re.M)
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_BUDGET = re.compile(r"\b(under|around)\s*\$([\d,]+(?:\.\d+)?)", re.I)
MAX_CANDIDATES = 5


def recognised_mechanisms(system_message: str) -> frozenset[str]:
    """The mechanisms the skill block's chunk titles switch on."""
    titles = [title.casefold() for title in _SKILL.findall(system_message)]
    return frozenset(
        key
        for key, groups in MECHANISM_CUES.items()
        if any(all(cue in title for cue in group) for group in groups for title in titles)
    )


def _phrases(text: str) -> list[str]:
    parts = re.split(r",\s*|\s+and\s+", text)
    return [part.strip(" .").casefold() for part in parts if part.strip(" .")]


def _money(text: str) -> float | None:
    match = re.search(r"\$([\d,]+(?:\.\d+)?)", text)
    return float(match.group(1).replace(",", "")) if match else None


@dataclass
class Needs:
    """What the agent knows it must satisfy."""

    noun: str = ""
    attributes: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)  # "axis value" phrases
    budget: float | None = None


def explicit_needs(instruction: str) -> Needs:
    """The noun, attributes, options and budget the visible instruction states."""
    needs = Needs()
    match = _OPENER.search(instruction.strip())
    needs.noun = match.group(1).strip().casefold() if match else ""
    for sentence in re.split(r"(?<=\.)\s+", instruction.strip()):
        lowered = sentence.casefold()
        if " with " in lowered and "budget" not in lowered:
            needs.attributes += _phrases(lowered.split(" with ", 1)[1])
        elif lowered.startswith("i'd like "):
            needs.options += _phrases(lowered[len("i'd like ") :])
    if budget := _BUDGET.search(instruction):
        amount = float(budget.group(2).replace(",", ""))
        needs.budget = amount * 1.1 if budget.group(1).casefold() == "around" else amount
    return needs


def persona_needs(system_message: str, noun: str) -> Needs:
    """What the profile's notes about this product type add (musts, option picks, budget)."""
    needs = Needs(noun=noun)
    if not noun:
        return needs
    notes = re.findall(r"[A-Z][^.\"\n]*?\.", system_message)
    for note in notes:
        lowered = note.casefold()
        if noun not in lowered:
            continue
        for marker in (" ones with ", " has to have ", " must come with "):
            if marker in lowered:
                needs.attributes += _phrases(lowered.split(marker, 1)[1])
        if lowered.startswith("i always look for "):
            needs.attributes += _phrases(lowered[len("i always look for ") :].split(" when ")[0])
        pick = re.search(r"(?:\bin|\bpick|\bchoose)\s+(.+?)(?: for me)?\.$", lowered)
        if pick and "$" not in lowered and " with " not in lowered:
            needs.options.append(pick.group(1).strip())
        if "$" in lowered and (amount := _money(note)) is not None:
            approximate = "around" in lowered or "roughly" in lowered
            needs.budget = amount * 1.1 if approximate else amount
    return needs


@dataclass
class _Episode:
    mechanisms: frozenset[str]
    needs: Needs
    query: str
    tried: list[str] = field(default_factory=list)
    rejected: set[str] = field(default_factory=set)
    results: list[tuple[str, str, str]] = field(default_factory=list)
    pages_seen: int = 0


class ProceduralPolicy:
    """`PolicyBackend` of the procedural test double (see the module docstring)."""

    name = "procedural"
    renderer = None

    def __init__(
        self,
        model: str = "procedural",
        *,
        checkpoint_id: str | None = None,
        slip: float = 0.05,
        competence: float = 0.0,
        turn_delay_s: float = 0.0,
        **_ignored: Any,
    ) -> None:
        if not (0.0 <= slip <= 1.0 and 0.0 <= competence <= 1.0):
            raise ValueError("slip and competence must be probabilities")
        if turn_delay_s < 0:
            raise ValueError("turn_delay_s must be >= 0")
        self.turn_delay_s = turn_delay_s
        self.competence = competence
        self.model_id = f"procedural-test-double:{model}"
        self.checkpoint_id = checkpoint_id or "procedural-test-double"
        self.slip = slip
        self._episodes: dict[str, _Episode] = {}

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        outputs: list[TurnOutput | TurnFailure] = []
        for request in requests:
            time.sleep(self.turn_delay_s)
            try:
                action = self.act(request)
            except Exception as error:  # a parsing bug fails its episode, not the batch
                outputs.append(TurnFailure(f"procedural policy: {type(error).__name__}: {error}"))
                continue
            outputs.append(action_output(action, tools=request.tools is not None))
        return outputs

    def release(self, key: str) -> None:
        self._episodes.pop(key, None)

    def close(self) -> None:
        self._episodes.clear()

    # -- acting ------------------------------------------------------------------------------

    def act(self, request: TurnRequest) -> str:
        """The next action (`search[...]` or `click[...]`) for one episode's conversation."""
        episode = self._episodes.get(request.key) or self._start(request.messages, request.seed)
        self._episodes[request.key] = episode
        # The latest page: protocol-error feedback messages carry no page of their own.
        observation = next(
            (
                text
                for message in reversed(request.messages[1:])
                if "Page: " in (text := str(message.get("content") or ""))
            ),
            "",
        )
        observation = observation[observation.index("Page: ") :] if observation else ""
        clickables = re.findall(r"^- (.+)$", observation.split("Clickable:", 1)[-1], re.M)
        rng = random.Random(request.seed)
        if "Search: available" in observation or "Page: search home" in observation:
            return f"search[{episode.query}]"
        if observation.startswith("Page: search results"):
            return self._on_results(episode, observation, clickables, rng)
        if observation.startswith("Page: product"):
            return self._on_item(episode, observation, clickables)
        return f"click[{clickables[0]}]" if clickables else f"search[{episode.query}]"

    def _start(self, messages: Sequence[dict[str, Any]], seed: int) -> _Episode:
        system = str(messages[0].get("content") or "")
        task = str(messages[1].get("content") or "").split("\n\n", 1)[0]
        instruction = task.split("\n", 1)[-1]
        rng = random.Random(f"competence:{seed}")
        innate = {key for key in MECHANISMS if rng.random() < self.competence}
        mechanisms = recognised_mechanisms(system) | innate
        explicit = explicit_needs(instruction)
        needs = Needs(noun=explicit.noun, attributes=list(explicit.attributes))
        needs.options = list(explicit.options) if "option_choice" in mechanisms else []
        needs.budget = explicit.budget
        persona = Needs()
        if "persona_constraints" in mechanisms:
            persona = persona_needs(system.split("<skill", 1)[0], explicit.noun)
            needs.attributes += [a for a in persona.attributes if a not in needs.attributes]
            needs.options += [o for o in persona.options if o not in needs.options]
            needs.budget = needs.budget if needs.budget is not None else persona.budget
        words = [explicit.noun or instruction]
        if "explicit_query" in mechanisms:
            words += explicit.attributes
        words += persona.attributes
        return _Episode(mechanisms, needs, " ".join(dict.fromkeys(words)))

    def _coverage(self, episode: _Episode, text: str) -> int:
        folded = text.casefold()
        return sum(attribute in folded for attribute in episode.needs.attributes)

    def _on_results(
        self, episode: _Episode, observation: str, clickables: list[str], rng: random.Random
    ) -> str:
        found = _RESULT.findall(observation)
        if found:
            episode.results = found
            episode.pages_seen += 1
        untried = [row for row in episode.results if row[0] not in episode.tried]
        if not untried:
            return "click[back to search]"
        if rng.random() < self.slip:
            pick = rng.choice(untried)[0]
        elif "inspect_candidates" in episode.mechanisms:
            if len(episode.tried) >= MAX_CANDIDATES:
                return f"click[{self._fallback(episode)}]"
            pick = max(untried, key=lambda row: self._coverage(episode, row[1]))[0]
        else:
            pick = untried[0][0]
        episode.tried.append(pick)
        return f"click[{pick}]"

    def _fallback(self, episode: _Episode) -> str:
        """When every inspected candidate was rejected: the first one not rejected, else the
        first tried (the agent must buy something)."""
        kept = [asin for asin in episode.tried if asin not in episode.rejected]
        return (kept or episode.tried)[0]

    def _on_item(self, episode: _Episode, observation: str, clickables: list[str]) -> str:
        page = observation.split("\nLast action:")[0]
        mechanisms, needs = episode.mechanisms, episode.needs
        by_axis: dict[str, list[str]] = {}
        for label in clickables:
            if "=" in label:
                axis, value = label.split("=", 1)
                by_axis.setdefault(axis, []).append(value)
        missing = re.search(r"^Still to choose: (.*)$", page, re.M)
        unset = [axis.strip() for axis in missing.group(1).split(",")] if missing else []
        chosen_once = any(f"{axis}: selected" in page for axis in by_axis)
        if unset and ("complete_options" in mechanisms or not chosen_once):
            axis = unset[0]
            return f"click[{axis}={self._value(needs, axis, by_axis.get(axis, []))}]"
        if unset:
            return "click[buy now]"  # the naive agent believes one choice is enough
        for axis, values in by_axis.items():
            wanted = [v for v in values if f"{axis} {v}".casefold() in needs.options]
            if wanted and f"{axis}: selected {wanted[0]}" not in page:
                return f"click[{axis}={wanted[0]}]"
        current = episode.tried[-1] if episode.tried else ""
        more = len(episode.tried) < MAX_CANDIDATES and current not in episode.rejected
        if "inspect_candidates" in mechanisms and more:
            attributes = page.split("Key attributes:", 1)[-1].split("\n", 1)[0]
            title = page.split("Title:", 1)[-1].split("\n", 1)[0]
            if self._coverage(episode, attributes + " " + title) < len(needs.attributes):
                episode.rejected.add(current)
                return "click[< prev]"
        if "price_check" in mechanisms and needs.budget is not None and more:
            shown = _NUMBER.findall(page.split("Price:", 1)[-1].split("\n", 1)[0])
            if shown and float(shown[0].replace(",", "")) > needs.budget + 1e-9:
                episode.rejected.add(current)
                return "click[< prev]"
        return "click[buy now]"

    @staticmethod
    def _value(needs: Needs, axis: str, values: list[str]) -> str:
        wanted = [value for value in values if f"{axis} {value}".casefold() in needs.options]
        return (wanted or values or [""])[0]


def action_output(action: str, *, tools: bool) -> TurnOutput:
    """The reply as the runtime's protocol expects it: a parsed tool call, or action text."""
    verb, argument = action.split("[", 1)
    argument = argument[:-1]
    key = "query" if verb == "search" else "value"
    if not tools:
        return TurnOutput(
            text=action,
            finish_reason="stop",
            assistant_message={"role": "assistant", "content": action},
            completion_tokens=1,
        )
    call = ToolCall(verb, {key: argument}, raw=action)
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": verb, "arguments": json.dumps({key: argument})},
            }
        ],
    }
    return TurnOutput(
        text="",
        finish_reason="stop",
        assistant_message=message,
        tool_calls=(call,),
        completion_tokens=1,
    )
