"""Selection of the next bank S_{t+1} from a gate's strict-reward coefficients.

1. In each replacement family the largest coefficient wins; an exact tie keeps the old version
   (then the earlier new version). Losers take no budget slot.
2. Family winners and ordinary chunks are ranked together by (-coefficient, intervention id).
3. The strictly positive ones are kept, in rank order, up to the budget K. With the
   lower-bound admission (`gate.admit = "lower_bound"`), only those whose one-sided 95 % lower
   bound is also above 0.

Statuses: `selected`; `rewrite_loser` (lost its family, old versions included); `retired` (a
current version that won its family but was not kept); `non_positive` / `budget_excluded` (a
candidate that won its slot but has beta <= 0 / was cut by the budget); `below_bound` (a
candidate with beta > 0 whose lower bound is <= 0, under the lower-bound admission). The new
bank keeps slot order: a winning rewrite takes its family's logical id and position, admitted
ADDs follow in candidate order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from services.evaluator.design import GateDesign, Slot, Version, VersionKind

Status = Literal[
    "selected", "retired", "rewrite_loser", "non_positive", "budget_excluded", "below_bound"
]
STATUSES: tuple[Status, ...] = (
    "selected",
    "retired",
    "rewrite_loser",
    "non_positive",
    "budget_excluded",
    "below_bound",
)


@dataclass(frozen=True)
class Decision:
    """The fate of one chunk version at a gate."""

    intervention_id: str
    logical_id: str
    kind: VersionKind
    order: int
    coefficient: float
    rank: int | None  # over family winners; None for rewrite losers
    status: Status


@dataclass(frozen=True)
class BankEntry:
    """One chunk of S_{t+1}: its logical id, the version that won, and that version's evidence."""

    logical_id: str
    intervention_id: str
    coefficient: float
    rank: int


@dataclass(frozen=True)
class Selection:
    decisions: tuple[Decision, ...]  # column order
    bank: tuple[BankEntry, ...]  # bank order

    @property
    def selected(self) -> tuple[str, ...]:
        return tuple(entry.intervention_id for entry in self.bank)

    @property
    def rank(self) -> dict[str, int | None]:
        return {decision.intervention_id: decision.rank for decision in self.decisions}

    @property
    def status(self) -> dict[str, Status]:
        return {decision.intervention_id: decision.status for decision in self.decisions}


def family_winner(slot: Slot, coefficients: Mapping[str, float]) -> Version:
    """The slot's version with the largest coefficient; exact ties go to the earlier (old) one."""
    winner = slot.versions[0]
    for version in slot.versions[1:]:
        if coefficients[version.intervention_id] > coefficients[winner.intervention_id]:
            winner = version
    return winner


def select(
    design: GateDesign,
    coefficients: Mapping[str, float],
    *,
    budget: int | None = None,
    lower_bounds: Mapping[str, float] | None = None,
) -> Selection:
    """Apply the selection rule to strict-reward coefficients keyed by intervention id; with
    `lower_bounds`, a chunk is admitted only if its lower bound is above 0 as well."""
    missing = [vid for vid in design.column_ids if vid not in coefficients]
    if missing:
        raise ValueError(f"no coefficient for {', '.join(missing)}")
    budget = design.budget if budget is None else budget
    if budget < 1:
        raise ValueError("budget K must be at least 1")
    winners = {slot.logical_id: family_winner(slot, coefficients) for slot in design.slots}
    ranked = sorted(
        winners.values(), key=lambda v: (-coefficients[v.intervention_id], v.intervention_id)
    )
    rank = {version.intervention_id: position for position, version in enumerate(ranked, 1)}

    def admissible(vid: str) -> bool:
        return coefficients[vid] > 0 and (lower_bounds is None or lower_bounds[vid] > 0)

    kept: set[str] = set()
    for version in ranked:
        if admissible(version.intervention_id) and len(kept) < budget:
            kept.add(version.intervention_id)

    decisions = []
    for version in design.columns:
        vid = version.intervention_id
        beta = float(coefficients[vid])
        if winners[version.logical_id] is not version:
            status: Status = "rewrite_loser"
        elif vid in kept:
            status = "selected"
        elif version.is_old:
            status = "retired"
        elif beta <= 0:
            status = "non_positive"
        else:
            status = "budget_excluded" if admissible(vid) else "below_bound"
        decisions.append(
            Decision(
                vid, version.logical_id, version.kind, version.order, beta, rank.get(vid), status
            )
        )
    bank = tuple(
        BankEntry(
            slot.logical_id,
            winners[slot.logical_id].intervention_id,
            float(coefficients[winners[slot.logical_id].intervention_id]),
            rank[winners[slot.logical_id].intervention_id],
        )
        for slot in design.slots
        if winners[slot.logical_id].intervention_id in kept
    )
    return Selection(tuple(decisions), bank)
