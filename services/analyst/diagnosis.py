"""Deterministic failure diagnosis: compare a failed trace with the task's gold and name every
divergence, each with the step it happened at and the repair mechanism that addresses it.

The rules read the privileged task record (full instruction, which constraints only the
persona carries, the gold options and budget); the evidence they write is privileged too and
stays in the card's audit, never in its deployable part.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.analyst.mechanisms import LIBRARY, WORKFLOW
from services.analyst.trace import TraceFacts
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.task import Task


@dataclass(frozen=True)
class Divergence:
    mechanism: str
    step: int
    evidence: str  # privileged: may name gold facts

    @property
    def failure_surface(self) -> str:
        return LIBRARY[self.mechanism].failure_surface


def diagnose(trajectory: Trajectory, task: Task, facts: TraceFacts) -> list[Divergence]:
    """Every divergence found, earliest first (ties in workflow order)."""
    found = [
        *_query_divergences(task, facts),
        *_candidate_divergences(task, facts),
        *_option_divergences(trajectory, task, facts),
        *_price_divergences(trajectory, task, facts),
    ]
    unique: dict[str, Divergence] = {}
    for divergence in sorted(found, key=lambda d: (d.step, WORKFLOW.index(d.mechanism))):
        unique.setdefault(divergence.mechanism, divergence)
    return list(unique.values())


def _persona_only(task: Task, kind: str) -> set[str]:
    prefix = f"{kind}:"
    return {key[len(prefix) :] for key in task.persona_only if key.startswith(prefix)}


def _query_divergences(task: Task, facts: TraceFacts) -> list[Divergence]:
    first = facts.queries[0][0] if facts.queries else 0
    queried = " ".join(query for _, query in facts.queries)
    bought = facts.last_visit
    lacking = set(task.attributes) - set(bought.attributes if bought else ())
    hidden = _persona_only(task, "attribute")
    explicit_missing = [a for a in task.attributes if a not in hidden and a not in queried]
    persona_missing = [a for a in task.attributes if a in hidden and a not in queried]
    found = []
    if explicit_missing and lacking:
        found.append(Divergence("explicit_query", first, f"query lacks stated {explicit_missing}"))
    if persona_missing and lacking & set(persona_missing):
        found.append(
            Divergence("persona_constraints", first, f"profile-only {persona_missing} never used")
        )
    return found


def _candidate_divergences(task: Task, facts: TraceFacts) -> list[Divergence]:
    bought = facts.last_visit
    if bought is None:
        return []
    lacking = [a for a in task.attributes if a not in bought.attributes]
    wrong_type = task.gold_category and task.gold_category.split(" › ")[-1].casefold() not in (
        bought.title.casefold()
    )
    opened = len({visit.product_id for visit in facts.visits})
    if lacking and opened <= 1:
        return [
            Divergence(
                "inspect_candidates",
                bought.step,
                f"opened {bought.product_id} ({bought.title}) lacking {lacking}; gold "
                f"{task.gold_asin}; wrong type: {bool(wrong_type)}",
            )
        ]
    return []


def _option_divergences(trajectory: Trajectory, task: Task, facts: TraceFacts) -> list[Divergence]:
    found = []
    if facts.blocked_buys and trajectory.termination == "action_limit":
        found.append(
            Divergence(
                "complete_options",
                facts.blocked_buys[0],
                f"buy now refused {len(facts.blocked_buys)} times with axes unset; "
                f"ended at the step cap",
            )
        )
    hidden = _persona_only(task, "option")
    for axis, wanted in task.gold_options.items():
        step, chosen = facts.selections.get(axis, (None, None))
        named = wanted in task.instruction_options  # the full request names this value
        if step is None or chosen == wanted or not named:
            continue
        mechanism = "persona_constraints" if axis in hidden else "option_choice"
        found.append(Divergence(mechanism, step, f"{axis}: chose {chosen!r}, wanted {wanted!r}"))
    return found


def _price_divergences(trajectory: Trajectory, task: Task, facts: TraceFacts) -> list[Divergence]:
    if trajectory.termination != "purchase" or trajectory.components.get("r_price", 1.0) >= 1.0:
        return []
    if task.price_upper is None:
        return []
    step = len(trajectory.steps) - 1
    mechanism = "persona_constraints" if "budget" in task.persona_only else "price_check"
    return [
        Divergence(mechanism, step, f"paid above the ceiling {task.price_upper:.2f} (gold budget)")
    ]
