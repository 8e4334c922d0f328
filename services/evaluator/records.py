"""The evaluator's registry side: build a gate from the registry, and record what it decided.

Only `shared.registry_api` is used (the typed client and wire schemas). Ids on our side:
a chunk version is "slug@version" (what the agent runtime writes in a trajectory's provenance),
its logical id (the mask's slot key) is the chunk slug.

Recorded per gate: the gate run (pool + mask seed + protocol note), the raw paired
observations, the decision (coefficients of every component, HC3 SEs and intervals, ranks and
statuses), and, when the gate is complete, the new frozen bank S_{t+1}; then `current` moves
with If-Match on the ETag read when the gate was planned, so a concurrent move is never
overwritten. An incomplete gate is closed as such, listing its unpaired tasks, and adopts
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.evaluator.design import (
    DEFAULT_MASK_SEED,
    DEFAULT_SPLIT,
    DesignError,
    GateDesign,
    Slot,
    Version,
    online_design,
    slot_state,
)
from services.evaluator.fit import PRIMARY, PairedObservation, Solver
from services.evaluator.gate_run import GateOutcome, GatePlan
from services.evaluator.pairing import RolloutIdentity
from shared.chunks import InjectedChunk
from shared.registry_api.client import PreconditionFailed, RegistryClient, RegistryError
from shared.registry_api.schemas import (
    BankPublic,
    CandidateOperation,
    CandidatePool,
    DecisionCreate,
    DecisionRowIn,
    GateRunCreate,
    GateRunPublic,
    GateStatus,
    ObservationIn,
    PoolColumn,
    PoolColumnKind,
    RewardComponents,
)

PROTOCOL_KEY = "intraskill-evaluator"
MAX_NOTE = 4000


def version_id(slug: str, version: int) -> str:
    return f"{slug}@{version}"


@dataclass(frozen=True)
class RegistryGate:
    """A gate planned from the registry: the plan plus the registry ids behind every column."""

    plan: GatePlan
    base_bank: BankPublic
    alias: str
    alias_etag: str | None  # None: the alias did not point at the base bank when planned
    version_ids: Mapping[str, int]  # intervention id -> chunk_version_id
    candidate_ids: Mapping[str, int] = field(default_factory=dict)  # intervention id -> candidate

    def pool(self) -> CandidatePool:
        return CandidatePool(
            columns=[
                PoolColumn(
                    chunk_version_id=self.version_ids[version.intervention_id],
                    kind=PoolColumnKind(version.kind),
                    slot=version.order - 1,
                    candidate_id=self.candidate_ids.get(version.intervention_id),
                )
                for version in self.plan.design.columns
            ]
        )


def plan_gate(
    client: RegistryClient,
    *,
    task_ids: Sequence[str],
    round: int,
    alias: str = "current",
    base_bank_id: int | None = None,
    candidate_ids: Sequence[int] | None = None,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = 10,
    max_retries: int = 2,
    solver: Solver = "statsmodels",
) -> RegistryGate:
    """Slots from the base bank (default: the alias's bank) and the round's proposed candidates."""
    pointer = client.get_alias(alias)
    bank = client.get_bank(base_bank_id or pointer.bank_id)
    etag = pointer.etag if pointer.bank_id == bank.id else None
    if candidate_ids is None:
        candidates = client.list_candidates(round=round, status="proposed")
    else:
        candidates = [client.get_candidate(cid) for cid in candidate_ids]
    current: list[str] = []
    current_versions: dict[str, str] = {}
    chunks: dict[str, InjectedChunk] = {}
    version_ids: dict[str, int] = {}
    slug_of_chunk: dict[int, str] = {}
    for entry in sorted(bank.entries, key=lambda e: e.position):
        vid = version_id(entry.slug, entry.version)
        current.append(entry.slug)
        current_versions[entry.slug] = vid
        slug_of_chunk[entry.chunk_id] = entry.slug
        chunks[vid] = InjectedChunk(
            chunk_id=entry.slug, version=entry.version, content=entry.content
        )
        version_ids[vid] = entry.chunk_version_id
    adds: list[str] = []
    add_versions: dict[str, str] = {}
    rewrites: dict[str, list[str]] = {}
    candidate_of: dict[str, int] = {}
    order_key: dict[str, int] = {}
    for candidate in sorted(candidates, key=lambda c: c.id):
        view = client.get_chunk_version_by_id(candidate.chunk_version_id)
        vid = version_id(view.slug, view.version)
        chunks[vid] = InjectedChunk(chunk_id=view.slug, version=view.version, content=view.content)
        version_ids[vid] = view.id
        candidate_of[vid] = candidate.id
        if candidate.operation == CandidateOperation.REWRITE:
            target = slug_of_chunk.get(candidate.target_chunk_id or -1)
            if target is None:
                raise DesignError(
                    f"candidate {candidate.id}: REWRITE target chunk {candidate.target_chunk_id} "
                    f"is not in bank {bank.id}"
                )
            rewrites.setdefault(target, []).append(vid)
            order_key[vid] = candidate.id
        else:
            adds.append(view.slug)
            add_versions[view.slug] = vid
            order_key[view.slug] = candidate.id
    design = online_design(
        current,
        adds=adds,
        rewrites=rewrites,
        current_versions=current_versions,
        add_versions=add_versions,
        candidate_key=lambda key: order_key[key],
        mask_seed=mask_seed,
        split=split,
        budget=budget,
    )
    plan = GatePlan(design, tuple(task_ids), chunks=chunks, max_retries=max_retries, solver=solver)
    return RegistryGate(plan, bank, alias, etag, version_ids, candidate_of)


def protocol_note(plan: GatePlan, identity: RolloutIdentity) -> str:
    """What the registry's gate run has no field for, as one JSON line in its note."""
    return json.dumps(
        {
            PROTOCOL_KEY: {
                "gate_kind": plan.design.kind,
                "split": plan.design.split,
                "sample": plan.sample,
                "budget": plan.design.budget,
                "solver": plan.solver,
                "max_retries": plan.max_retries,
                "n_tasks": len(plan.task_ids),
                "identity": identity.as_dict(),
            }
        },
        sort_keys=True,
    )


def read_protocol(note: str | None) -> dict[str, Any]:
    if not note:
        return {}
    try:
        return dict(json.loads(note.splitlines()[0]).get(PROTOCOL_KEY, {}))
    except (ValueError, AttributeError):
        return {}


def open_gate_run(
    client: RegistryClient, gate: RegistryGate, *, round: int, identity: RolloutIdentity
) -> GateRunPublic:
    """Create the registry's gate run (status open) for a planned gate."""
    return client.create_gate_run(
        GateRunCreate(
            round=round,
            checkpoint_id=identity.checkpoint_id,
            base_bank_id=gate.base_bank.id,
            candidate_pool=gate.pool(),
            mask_seed=gate.plan.design.mask_seed,
            note=protocol_note(gate.plan, identity),
        )
    )


def observation_in(design: GateDesign, observation: PairedObservation) -> ObservationIn:
    states = [
        slot_state(design, slot, observation.task_id, observation.sample) for slot in design.slots
    ]
    return ObservationIn(
        task_id=observation.task_id,
        sample_id=observation.sample,
        inclusion=list(observation.mask),
        slot_states=states,
        bare=RewardComponents(**observation.bare),
        masked=RewardComponents(**observation.masked),
    )


@dataclass
class RecordedGate:
    gate_run_id: int
    status: str
    decision_id: int | None = None
    bank_id: int | None = None
    alias_moved: bool = False
    alias_note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def record_gate(
    client: RegistryClient,
    gate: RegistryGate,
    run: GateRunPublic,
    outcome: GateOutcome,
    *,
    round: int,
    move_alias: bool = True,
) -> RecordedGate:
    """Store observations, then decision + S_{t+1} + alias move (complete) or close (incomplete)."""
    design = gate.plan.design
    if outcome.pairing is not None and outcome.pairing.observations:
        client.add_observations(
            run.id, [observation_in(design, o) for o in outcome.pairing.observations]
        )
    if outcome.status != "complete" or outcome.decision is None:
        note = json.dumps(
            {
                "error": outcome.error,
                "unpaired": list(outcome.pairing.unpaired if outcome.pairing else ())[:40],
            }
        )[:MAX_NOTE]
        status = GateStatus.incomplete if outcome.status == "incomplete" else GateStatus.failed
        client.close_gate_run(run.id, status, note=note)
        return RecordedGate(run.id, status.value)

    decision = outcome.decision
    rows = []
    for row in decision.selection.decisions:
        index = decision.fit.ids.index(row.intervention_id)
        rows.append(
            DecisionRowIn(
                chunk_version_id=gate.version_ids[row.intervention_id],
                coefficients={n: f.coefficients[index] for n, f in decision.fit.components.items()},
                rank=row.rank,
                status=row.status,
                hc3_se={n: f.hc3_se[index] for n, f in decision.fit.components.items()},
                ci_low={n: f.ci_low[index] for n, f in decision.fit.components.items()},
                ci_high={n: f.ci_high[index] for n, f in decision.fit.components.items()},
            )
        )
    stored = client.post_decision(
        run.id,
        DecisionCreate(
            primary_component=PRIMARY,
            rows=rows,
            note=json.dumps({"solver": gate.plan.solver, "next_rho": decision.next_rho})[:MAX_NOTE],
        ),
    )
    recorded = RecordedGate(run.id, GateStatus.complete.value, decision_id=stored.id)
    entries = [
        {
            "chunk_version_id": gate.version_ids[entry.intervention_id],
            "rho": decision.next_rho[entry.intervention_id],
            "coefficient": entry.coefficient,
        }
        for entry in decision.selection.bank
    ]
    bank = client.create_bank(
        entries,
        q=gate.base_bank.q,
        round=round + 1,
        parent_bank_id=gate.base_bank.id,
        gate_decision_id=stored.id,
        note=f"S_{round + 1} selected by gate run {run.id}",
        idempotency_key=f"gate-{run.id}-bank",
    )
    client.freeze_bank(bank.id, idempotency_key=f"gate-{run.id}-freeze")
    recorded.bank_id = bank.id
    if not move_alias:
        recorded.alias_note = "alias not moved (move_alias off)"
    elif gate.alias_etag is None:
        recorded.alias_note = f"{gate.alias} did not point at the base bank when the gate started"
    else:
        try:
            client.move_alias(
                gate.alias,
                bank.id,
                reason=f"gate run {run.id} (round {round}) complete",
                if_match=gate.alias_etag,
                gate_decision_id=stored.id,
            )
            recorded.alias_moved = True
        except PreconditionFailed as error:
            recorded.alias_note = f"{gate.alias} moved since the gate started; left as is ({error})"
    return recorded


def load_gate_run(
    run_id: str | int, client: RegistryClient | None = None
) -> tuple[GateDesign, list[PairedObservation], Solver]:
    """A stored gate's design, raw observations and solver: what `gate refit` needs."""
    if client is None:
        from services.evaluator.settings import EvaluatorSettings

        client = EvaluatorSettings().registry_client()
    try:
        run = client.get_gate_run(int(run_id))
        protocol = read_protocol(run.note)
        columns = run.candidate_pool.columns
        views = {
            c.chunk_version_id: client.get_chunk_version_by_id(c.chunk_version_id) for c in columns
        }
        stored = client.list_observations(run.id)
    except (RegistryError, ValueError) as error:
        raise LookupError(f"gate run {run_id}: {error}") from None
    slots: list[Slot] = []
    for number in sorted({c.slot for c in columns}):
        members = [c for c in columns if c.slot == number]
        logical = views[members[0].chunk_version_id].slug
        slots.append(
            Slot(
                logical,
                number + 1,
                tuple(
                    Version(
                        version_id(
                            views[c.chunk_version_id].slug, views[c.chunk_version_id].version
                        ),
                        logical,
                        c.kind.value,  # type: ignore[arg-type]
                        number + 1,
                    )
                    for c in members
                ),
            )
        )
    design = GateDesign(
        protocol.get("gate_kind", "online"),
        tuple(slots),
        mask_seed=run.mask_seed,
        split=protocol.get("split", DEFAULT_SPLIT),
        budget=int(protocol.get("budget", 10)),
    )
    observations = [
        PairedObservation(
            task_id=o.task_id,
            mask=tuple(o.inclusion),
            masked=o.masked.model_dump(),
            bare=o.bare.model_dump(),
            sample=o.sample_id,
        )
        for o in stored
    ]
    return design, observations, protocol.get("solver", "statsmodels")
