"""Reference agents. `OracleAgent` reads the gold (counterfactual checks, solvability tests);
`HeuristicAgent` sees only what a policy sees: the visible instruction, the persona document
and the pages. `run_episode` drives either through an environment."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.site import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE
from shared.runtime.shopsim.task import Task
from shared.runtime.shopsim.types import RewardBreakdown, StepResult, TaskView


class Agent(Protocol):
    def act(self, result: StepResult) -> str: ...


@dataclass
class EpisodeRecord:
    task_id: str
    actions: list[str]
    reward: float
    breakdown: RewardBreakdown | None
    steps: int

    @property
    def success(self) -> bool:
        return bool(self.breakdown and self.breakdown.r_success == 1)


def run_episode(
    env: ShopEnv, task_id: str, agent: Agent, seed: int = 0, max_turns: int | None = None
) -> EpisodeRecord:
    """One episode; `max_turns` cuts it as the agent runtime's cap does (unfinished: reward 0)."""
    episode, result = env.reset(task_id, seed)
    actions: list[str] = []
    while not result.done:
        if max_turns is not None and len(actions) >= max_turns:
            return EpisodeRecord(task_id, actions, 0.0, None, episode.steps)
        action = agent.act(result)
        actions.append(action)
        result = episode.step(action)
    return EpisodeRecord(task_id, actions, result.reward, result.breakdown, episode.steps)


class OracleAgent:
    """Searches the gold title, pages until the gold appears, picks the recorded options."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.queries = [task.gold_title, " ".join((task.gold_title, *task.attributes))]
        self.searched = 0

    def act(self, result: StepResult) -> str:
        state, task = result.state, self.task
        if state.page == "search":
            query = self.queries[min(self.searched, len(self.queries) - 1)]
            self.searched += 1
            return f"search[{query}]"
        if state.page == "results":
            if task.gold_asin in state.clickables:
                return f"click[{task.gold_asin}]"
            return f"click[{NEXT_PAGE if NEXT_PAGE in state.clickables else BACK_TO_SEARCH}]"
        if state.page == "attributes":
            return f"click[{PREV_PAGE}]"
        for axis, value in task.gold_options.items():
            label = f"{axis}={value}"
            if label in state.clickables:
                return f"click[{label}]"
        return f"click[{BUY_NOW}]"


_RESULT_LINE = re.compile(r"^\d+\. (B0[0-9A-Z]{8}) \| (.*) \| (.*)$", re.MULTILINE)
_PRICE = re.compile(r"\$([\d,]+(?:\.\d+)?)")
_PAGE_PRICE = re.compile(r"\$?(\d[\d,]*(?:\.\d+)?)")
_BUDGET = re.compile(r"(under|around|below|max(?:imum)?|up to)\s*\$([\d,]+(?:\.\d+)?)", re.I)


def _money(text: str) -> float | None:
    match = _PRICE.search(text)
    return float(match.group(1).replace(",", "")) if match else None


def _page_price(text: str) -> float | None:
    """The first price a page shows: raw (`63.99 to 75.99`, reference style) or `$63.99`."""
    match = _PAGE_PRICE.search(text)
    return float(match.group(1).replace(",", "")) if match else None


def _phrases(text: str) -> list[str]:
    """Comma / 'and' separated phrases of a clause."""
    parts = re.split(r",\s*|\s+and\s+", text)
    return [part.strip(" .").casefold() for part in parts if part.strip(" .")]


@dataclass
class Needs:
    noun: str
    attributes: list[str]
    options: list[str]
    budget: float | None


def read_needs(view: TaskView) -> Needs:
    """What the instruction and the persona notes that name this product type ask for."""
    text = view.instruction
    folded = text.casefold()
    notes = [str(note) for note in view.persona.get("shopping_notes") or []]
    # The product type: the longest noun a note mentions that the instruction also names.
    nouns = re.findall(
        r"(?:for|my|get|buying|on|shop for)\s+(?:an?\s+)?([a-z -]+?)[,.]",
        " ".join(notes).casefold(),
    )
    mentioned = sorted({n.strip() for n in nouns if n.strip() and n.strip() in folded}, key=len)
    noun = mentioned[-1] if mentioned else ""
    relevant = [note for note in notes if noun and noun in note.casefold()]
    attributes: list[str] = []
    options: list[str] = []
    sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()]
    for sentence in sentences:
        lowered = sentence.casefold()
        if " with " in lowered and "budget" not in lowered:
            attributes += _phrases(lowered.split(" with ", 1)[1])
        elif lowered.startswith("i'd like "):
            options += [p.split(" ", 1)[-1] if " " in p else p for p in _phrases(lowered[9:])]
    budget = None
    match = _BUDGET.search(text)
    for note in relevant:
        lowered = note.casefold()
        for marker in (" with ", " have ", " for ", " come with "):
            if marker in lowered and "$" not in lowered and marker != " for ":
                attributes += _phrases(lowered.rsplit(marker, 1)[1])
                break
        else:
            if lowered.startswith("i always look for "):
                attributes += _phrases(lowered[len("i always look for ") :].split(" when ")[0])
        pick = re.search(r"(?:in|pick|choose)\s+(.+?)(?: for me)?\.$", lowered)
        if pick and "$" not in lowered:
            options.append(pick.group(1).split(" ", 1)[-1])
        if match is None and "$" in note:
            amount = _money(note)
            approximate = "around" in lowered or "roughly" in lowered
            budget = None if amount is None else amount * (1.1 if approximate else 1.0)
    if match:
        budget = float(match.group(2).replace(",", ""))
        if match.group(1).casefold() == "around":
            budget *= 1.1
    return Needs(noun, list(dict.fromkeys(attributes)), list(dict.fromkeys(options)), budget)


@dataclass
class HeuristicAgent:
    """A keyword baseline: search noun + wanted attributes, open the result whose title covers
    the most of them, select wanted option values (else the first value), buy if the page shows
    every wanted attribute within budget, otherwise try the next result."""

    view: TaskView
    max_candidates: int = 4
    # Outcome-neutral styles (search is case-folded bag-of-words; every axis must be chosen
    # anyway): the reading hints' teacher acts them out, the compliance probe detects them.
    query_style: str = "plain"
    """'plain' (noun, then attributes), 'upper' (the same in capitals) or 'noun_last'."""
    reverse_options: bool = False
    """Choose the axes still to choose from the last listed to the first."""
    needs: Needs = field(init=False)
    tried: list[str] = field(default_factory=list)
    best_partial: str | None = None

    def __post_init__(self) -> None:
        self.needs = read_needs(self.view)
        self._results: list[tuple[str, str, str]] = []

    def _query(self) -> str:
        noun = self.needs.noun or self.view.instruction
        if self.query_style == "noun_last":
            return " ".join([*self.needs.attributes, noun])
        query = " ".join([noun, *self.needs.attributes])
        return query.upper() if self.query_style == "upper" else query

    def _coverage(self, text: str) -> int:
        folded = text.casefold()
        return sum(attribute in folded for attribute in self.needs.attributes)

    def act(self, result: StepResult) -> str:
        state = result.state
        steps_left = state.max_steps - state.step
        if state.page == "search":
            return f"search[{self._query()}]"
        if state.page == "results":
            found = _RESULT_LINE.findall(result.observation)
            if found:
                self._results = found
            candidates = [r for r in self._results if r[0] not in self.tried]
            if not candidates or len(self.tried) >= self.max_candidates:
                pick = self.best_partial or (self._results[0][0] if self._results else None)
                if pick is None:
                    return f"click[{BACK_TO_SEARCH}]"
                self.tried.append(pick)
                return f"click[{pick}]"

            def rank(row: tuple[str, str, str]) -> tuple[int, int]:
                price = _page_price(row[2])
                affordable = self.needs.budget is None or (
                    price is not None and price <= self.needs.budget
                )
                return (self._coverage(row[1]), int(affordable))

            best = max(candidates, key=rank)
            self.tried.append(best[0])
            return f"click[{best[0]}]"
        if state.page == "attributes":
            return f"click[{PREV_PAGE}]"
        return self._on_item(result, steps_left)

    def _on_item(self, result: StepResult, steps_left: int) -> str:
        state, needs = result.state, self.needs
        page = result.observation.split("\nLast action:")[0]
        options = [c for c in state.clickables if "=" in c]
        by_axis: dict[str, list[str]] = {}
        for label in options:
            axis, value = label.split("=", 1)
            by_axis.setdefault(axis, []).append(value)
        missing_line = re.search(r"^Still to choose: (.*)$", page, re.MULTILINE)
        missing = [a.strip() for a in missing_line.group(1).split(",")] if missing_line else []
        for axis in reversed(missing) if self.reverse_options else missing:
            values = by_axis.get(axis, [])
            wanted = [v for v in values if v.casefold() in needs.options]
            if wanted or values:
                return f"click[{axis}={(wanted or values)[0]}]"
        # Switch a chosen value if a wanted one is offered on the same axis.
        for axis, values in by_axis.items():
            for value in values:
                if value.casefold() in needs.options and f"selected {value}" not in page:
                    return f"click[{axis}={value}]"
        covered = self._coverage(page) == len(needs.attributes)
        price = _page_price(page.split("Price:", 1)[1]) if "Price:" in page else None
        affordable = needs.budget is None or (price is not None and price <= needs.budget)
        current = self.tried[-1] if self.tried else None
        if covered and affordable:
            return f"click[{BUY_NOW}]"
        if covered and self.best_partial is None:
            self.best_partial = current
        if steps_left <= 2 or len(self.tried) > self.max_candidates:
            return f"click[{BUY_NOW}]" if BUY_NOW in state.clickables else f"click[{PREV_PAGE}]"
        return f"click[{PREV_PAGE}]"


AgentFactory = Callable[[ShopEnv, str], Agent]


def oracle_factory(env: ShopEnv, task_id: str) -> Agent:
    return OracleAgent(env.task(task_id))


def heuristic_factory(env: ShopEnv, task_id: str) -> Agent:
    return HeuristicAgent(env.task_view(task_id))


AGENTS: dict[str, AgentFactory] = {"oracle": oracle_factory, "heuristic": heuristic_factory}


def evaluate_agent(
    env: ShopEnv, agent: str, splits: tuple[str, ...] = ("train", "val", "test"), limit: int = 0
) -> dict[str, Any]:
    """Success rate and mean strict reward per split and per difficulty."""
    factory = AGENTS[agent]
    table: dict[str, dict[str, list[EpisodeRecord]]] = {}
    for split in splits:
        ids = env.task_ids(split)
        for task_id in ids[:limit] if limit else ids:
            record = run_episode(env, task_id, factory(env, task_id))
            difficulty = env.task(task_id).difficulty
            table.setdefault(split, {}).setdefault(difficulty, []).append(record)
            table[split].setdefault("all", []).append(record)

    def summary(records: list[EpisodeRecord]) -> dict[str, float]:
        n = len(records)
        return {
            "episodes": n,
            "success": sum(r.success for r in records) / n if n else 0.0,
            "r_strict": sum(r.reward for r in records) / n if n else 0.0,
            "steps": sum(r.steps for r in records) / n if n else 0.0,
        }

    return {
        split: {group: summary(records) for group, records in sorted(groups.items())}
        for split, groups in table.items()
    }


def turn_cap_table(
    env: ShopEnv, caps: tuple[int, ...], splits: tuple[str, ...] = ("train", "val", "test")
) -> dict[str, Any]:
    """Per split: the oracle's step counts (uncapped) and each agent's success at every cap.

    The oracle reads the gold, so its uncapped step count is the fewest turns a task can take
    with this action protocol; a cap below it makes the task unwinnable for any policy.
    """
    table: dict[str, Any] = {}
    for split in splits:
        ids = env.task_ids(split)
        oracle = [run_episode(env, task_id, oracle_factory(env, task_id)) for task_id in ids]
        steps = [record.steps for record in oracle if record.success]
        row: dict[str, Any] = {
            "tasks": len(ids),
            "oracle_success_uncapped": sum(r.success for r in oracle) / len(ids),
            "oracle_steps": {str(n): steps.count(n) for n in sorted(set(steps))},
            "success_by_cap": {},
        }
        for cap in caps:
            row["success_by_cap"][str(cap)] = {
                name: sum(
                    run_episode(env, task_id, factory(env, task_id), max_turns=cap).success
                    for task_id in ids
                )
                / len(ids)
                for name, factory in AGENTS.items()
            }
        table[split] = row
    return table
