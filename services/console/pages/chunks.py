"""Chunk: every version with the diff from the one before, its lineage (cards, candidate, the
gates that tested it and what they decided), and the aliases whose bank holds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from services.console.deps import Login
from services.console.diffing import FieldDiff, chunk_diff
from services.console.numbers import MEANINGS, VERDICTS, axis_title, included_counts
from services.console.pages.banks import all_banks
from services.console.plot import coefficient_plot
from services.console.views import render
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    BankEntryPublic,
    ChunkVersionPublic,
    DecisionRowPublic,
    GateRunPublic,
)

router = APIRouter()
PAGE = 100


@dataclass(frozen=True)
class Verdict:
    gate: GateRunPublic
    row: DecisionRowPublic
    provisional: bool
    component: str  # the decision's primary reward component: what its coefficient is about
    n: int  # observations whose mask included this version
    n_all: int  # the decision's observations in all
    next_rho: float | None  # its inclusion probability in the bank built from the decision

    @property
    def coefficient(self) -> float | None:
        return self.row.coefficients.get(self.component)

    @property
    def ci(self) -> tuple[float, float] | None:
        low, high = self.row.ci_low or {}, self.row.ci_high or {}
        if self.component in low and self.component in high:
            return low[self.component], high[self.component]
        return None


@dataclass(frozen=True)
class VersionView:
    version: ChunkVersionPublic
    diff: list[FieldDiff]  # against the version before (the first: against nothing)
    verdicts: list[Verdict]


@dataclass(frozen=True)
class ActiveIn:
    alias: str
    bank_id: int
    entry: BankEntryPublic


@router.get("/chunks")
def chunks_index(
    request: Request, session: Login, offset: Annotated[int, Query(ge=0)] = 0
) -> Response:
    page = session.registry.list_chunks(limit=PAGE, offset=offset)
    return render(request, "chunks.html", session, page=page)


def _next_rho(registry: RegistryClient, decision_ids: set[int]) -> dict[int, dict[int, float]]:
    """Per decision (of those given), the rho of each chunk version in the bank built from it."""
    return {
        bank.gate_decision_id: {
            e.chunk_version_id: e.rho for e in registry.get_bank(bank.id).entries
        }
        for bank in all_banks(registry)
        if bank.gate_decision_id in decision_ids
    }


def _verdicts(registry: RegistryClient, version_ids: set[int]) -> dict[int, list[Verdict]]:
    """Each version's rows in the decisions of the gates whose pool held it."""
    found: dict[int, list[Verdict]] = {vid: [] for vid in version_ids}
    gates = [
        gate
        for gate in sorted(registry.list_gate_runs(), key=lambda g: g.id)
        if gate.decision_id is not None
        and {column.chunk_version_id for column in gate.candidate_pool.columns} & version_ids
    ]
    next_rho = _next_rho(registry, {gate.decision_id for gate in gates})
    for gate in gates:
        decision = registry.get_decision(gate.decision_id)
        counts = included_counts(registry, gate)
        for row in decision.rows:
            if row.chunk_version_id in version_ids:
                found[row.chunk_version_id].append(
                    Verdict(
                        gate,
                        row,
                        decision.provisional,
                        decision.primary_component,
                        counts.get(row.chunk_version_id, 0),
                        decision.n_observations,
                        next_rho.get(decision.id, {}).get(row.chunk_version_id),
                    )
                )
    return found


def over_gates_plot(verdicts: list[Verdict]):
    """The chunk's effect gate after gate (oldest on top), one row per version tested."""
    if not verdicts:
        return None
    component = verdicts[-1].component
    return coefficient_plot(
        [
            (
                f"gate {v.gate.id} · round {v.gate.round} · v{v.row.version}",
                v.row.status.value,
                v.coefficient or 0.0,
                *(v.ci or (None, None)),
            )
            for v in verdicts
        ],
        axis_title=axis_title(component),
    )


def _active_in(registry: RegistryClient, chunk_id: int) -> list[ActiveIn]:
    """The aliases whose bank holds a version of this chunk, with that entry."""
    active = []
    for alias in registry.list_aliases():
        for entry in registry.get_bank(alias.bank_id).entries:
            if entry.chunk_id == chunk_id:
                active.append(ActiveIn(alias.name, alias.bank_id, entry))
    return active


@router.get("/chunks/{chunk_id}")
def chunk_page(request: Request, session: Login, chunk_id: int) -> Response:
    registry = session.registry
    chunk = registry.get_chunk(chunk_id)
    versions = registry.chunk_history(chunk_id)
    verdicts = _verdicts(registry, {v.id for v in versions})
    over_gates = sorted(
        (verdict for vid in verdicts for verdict in verdicts[vid]),
        key=lambda v: (v.gate.id, v.row.version),
    )
    views = [
        VersionView(v, chunk_diff(before.content if before else None, v.content), verdicts[v.id])
        for before, v in zip([None, *versions[:-1]], versions, strict=True)
    ]
    return render(
        request,
        "chunk.html",
        session,
        chunk=chunk,
        views=list(reversed(views)),
        active=_active_in(registry, chunk_id),
        meanings=MEANINGS,
        verdicts=VERDICTS,
        over_gates=over_gates,
        plot=over_gates_plot(over_gates),
    )
