"""The evaluator's registry side: plan a gate from the registry, and record what it decided.

Only `shared.contracts.registry_api` is used (the typed client and wire schemas). Ids on our side:
a chunk version is "slug@version" (what the agent runtime writes in a trajectory's provenance),
its logical id (the mask's slot key) is the chunk slug.

Two kinds of gate are planned here, and recorded by one path:

- an interval gate (`plan_gate`): the base bank S_t (default: the alias's bank) and the round's
  candidates; it produces S_{t+1};
- Gate A (`plan_gate_a`): cold-start draft chunk versions that are in no bank yet; it produces
  S_0 (rho from the Gate A coefficients, q = 0.2, no parent).

Recorded per gate: the gate run with its typed design and identity (kind, pool, split, sample,
mask seed, K, solver, task count, the rollouts' shared identity, the bare baseline), the raw paired
observations, and the decision (coefficients of every component, HC3 SEs and intervals, ranks
and statuses). A complete gate's decision is final: the new bank is created and frozen, then the
alias moves with If-Match on the ETag read when the gate was planned, so a concurrent move is never
overwritten (at cold start, when the alias does not exist yet, it is created). An incomplete gate
that could still be fitted stores its fit as a provisional decision, which the registry closes as
incomplete and never lets a bank or an alias move cite; one that could not be fitted is closed
as incomplete or failed. Either way it adopts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.evaluator.decision import AdmitRule, EmptyBankPolicy
from services.evaluator.design import (
    DEFAULT_MASK_SEED,
    DEFAULT_SPLIT,
    K_INIT,
    DesignError,
    GateDesign,
    Slot,
    Version,
    gate_a_design,
    online_design,
    slot_state,
)
from services.evaluator.fit import PRIMARY, PairedObservation, Solver
from services.evaluator.gate_run import GateOutcome, GatePlan
from services.evaluator.pairing import (
    RolloutIdentity,
    RolloutRecord,
    bare_plan_fingerprint,
    records_fingerprint,
)
from shared.contracts.chunks import InjectedChunk
from shared.contracts.inclusion import Q_SKILL_FREE
from shared.contracts.registry_api.client import (
    Conflict,
    NotFound,
    PreconditionFailed,
    RegistryClient,
)
from shared.contracts.registry_api.schemas import (
    BankPublic,
    BareBaseline,
    CandidateOperation,
    CandidatePool,
    ChunkSource,
    ChunkVersionPublic,
    DecisionCreate,
    DecisionRowIn,
    GateIdentity,
    GateKind,
    GateRunCreate,
    GateRunPublic,
    GateSolver,
    GateStatus,
    ObservationIn,
    PoolColumn,
    PoolColumnKind,
    RewardComponents,
)

MAX_NOTE = 4000
FRESH_BARE = "fresh"


def version_id(slug: str, version: int) -> str:
    return f"{slug}@{version}"


def injected(view: ChunkVersionPublic) -> tuple[str, InjectedChunk]:
    """A registry chunk version as the runtime injects it, keyed by its intervention id."""
    chunk = InjectedChunk(chunk_id=view.slug, version=view.version, content=view.content)
    return version_id(view.slug, view.version), chunk


@dataclass(frozen=True)
class RegistryGate:
    """A gate planned from the registry: the plan plus the registry ids behind every column."""

    plan: GatePlan
    base_bank: BankPublic | None  # None for Gate A: its drafts are in no bank
    alias: str
    alias_etag: str | None  # the ETag to move the alias with; None: do not move it
    version_ids: Mapping[str, int]  # intervention id -> chunk_version_id
    candidate_ids: Mapping[str, int] = field(default_factory=dict)  # intervention id -> candidate
    alias_absent: bool = False  # cold start: the alias does not exist yet; create it

    @property
    def kind(self) -> GateKind:
        return GateKind(self.plan.design.kind)

    def bank_round(self, round: int) -> int:
        """The round of the bank this gate produces: S_{t+1} after round t, S_0 from Gate A."""
        return round if self.kind == GateKind.gate_a else round + 1

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
    admit: AdmitRule = "coefficient",
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
        vid, chunk = injected(view)
        chunks[vid] = chunk
        version_ids[vid] = view.id
        candidate_of[vid] = candidate.id
        if candidate.operation == CandidateOperation.REWRITE:
            target = slug_of_chunk.get(candidate.target_chunk_id or -1)
            if target is None:
                raise DesignError(
                    f"candidate {candidate.id}: REWRITE target chunk {candidate.target_chunk_id} "
                    f"is not in bank {bank.id}",
                    field="candidate_ids",
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
    plan = GatePlan(design, tuple(task_ids), chunks=chunks, max_retries=max_retries,
                    solver=solver, admit=admit)  # fmt: skip
    return RegistryGate(plan, bank, alias, etag, version_ids, candidate_of)


def plan_gate_a(
    client: RegistryClient,
    *,
    task_ids: Sequence[str],
    draft_version_ids: Sequence[int],
    alias: str = "current",
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = K_INIT,
    max_retries: int = 2,
    solver: Solver = "statsmodels",
    admit: AdmitRule = "coefficient",
) -> RegistryGate:
    """Gate A over cold-start draft versions, in draft order (= the order of S_0)."""
    if len(set(draft_version_ids)) != len(draft_version_ids):
        raise DesignError("draft versions must be distinct", field="draft_version_ids")
    views = [client.get_chunk_version_by_id(vid) for vid in draft_version_ids]
    chunks: dict[str, InjectedChunk] = {}
    version_ids: dict[str, int] = {}
    draft_versions: dict[str, str] = {}
    for view in views:
        if view.source != ChunkSource.cold_start:
            raise DesignError(
                f"chunk version {view.id} ({view.slug}@{view.version}) is not a cold-start "
                f"draft (source {view.source.value})",
                field="draft_version_ids",
            )
        if view.slug in draft_versions:
            raise DesignError(f"two drafts of one chunk: {view.slug}", field="draft_version_ids")
        vid, chunk = injected(view)
        chunks[vid] = chunk
        version_ids[vid] = view.id
        draft_versions[view.slug] = vid
    design = gate_a_design(
        [view.slug for view in views],
        draft_versions=draft_versions,
        mask_seed=mask_seed,
        split=split,
        budget=budget,
    )
    try:
        etag, absent = client.get_alias(alias).etag, False
    except NotFound:
        etag, absent = None, True
    plan = GatePlan(design, tuple(task_ids), chunks=chunks, max_retries=max_retries,
                    solver=solver, admit=admit)  # fmt: skip
    return RegistryGate(plan, None, alias, etag, version_ids, alias_absent=absent)


def bare_baseline(
    plan: GatePlan,
    identity: RolloutIdentity,
    reused: Sequence[RolloutRecord] | None = None,
    *,
    source: str = FRESH_BARE,
) -> BareBaseline:
    """Which bare rollouts the gate pairs with: its bare plan, and the reused records (those of
    the gate's tasks) if any."""
    tasks = set(plan.task_ids)
    return BareBaseline(
        source=source,
        plan_sha256=bare_plan_fingerprint(identity, plan.task_ids, plan.sample),
        records_sha256=(
            None if reused is None else records_fingerprint(r for r in reused if r.task_id in tasks)
        ),
    )


def gate_run_create(
    gate: RegistryGate, *, round: int, identity: RolloutIdentity, baseline: BareBaseline
) -> GateRunCreate:
    """The registry's gate run for a planned gate: its design and its rollouts' identity."""
    design, plan = gate.plan.design, gate.plan
    if identity.split != design.split:
        raise DesignError(
            f"split differs: the rollouts ran on {identity.split!r}, the gate on {design.split!r}"
        )
    return GateRunCreate(
        kind=gate.kind,
        round=round,
        checkpoint_id=identity.checkpoint_id,
        base_bank_id=None if gate.base_bank is None else gate.base_bank.id,
        candidate_pool=gate.pool(),
        split=design.split,
        sample_id=plan.sample,
        mask_seed=design.mask_seed,
        budget=design.budget,
        solver=GateSolver(plan.solver),
        n_tasks=len(plan.task_ids),
        identity=GateIdentity(
            model=identity.model,
            decoding=identity.decoding,
            prompt_version=identity.prompt_version,
            prompt_fingerprint=identity.prompt_fingerprint,
            env_version=identity.env_version,
            action_protocol=identity.action_protocol,
        ),
        bare_baseline=baseline,
    )


def open_gate_run(
    client: RegistryClient,
    gate: RegistryGate,
    *,
    round: int,
    identity: RolloutIdentity,
    baseline: BareBaseline,
) -> GateRunPublic:
    """Create the registry's gate run (status open) for a planned gate."""
    return client.create_gate_run(
        gate_run_create(gate, round=round, identity=identity, baseline=baseline)
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
    provisional: bool = False
    bank_id: int | None = None
    alias_moved: bool = False
    alias_note: str | None = None
    empty_selection: bool = False  # complete, but no chunk had a positive coefficient

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _shortfall(outcome: GateOutcome) -> str:
    """Why a gate is not complete, and which tasks lack a pair (the first 40)."""
    unpaired = list(outcome.pairing.unpaired if outcome.pairing else ())
    return json.dumps({"error": outcome.error, "unpaired": unpaired[:40]})[:MAX_NOTE]


def decision_create(gate: RegistryGate, outcome: GateOutcome) -> DecisionCreate:
    """Every column's coefficients, HC3 SEs, intervals, rank and status; provisional unless the
    gate is complete."""
    decision = outcome.decision
    assert decision is not None
    fit = decision.fit
    rows = []
    for row in decision.selection.decisions:
        index = fit.ids.index(row.intervention_id)
        rows.append(
            DecisionRowIn(
                chunk_version_id=gate.version_ids[row.intervention_id],
                coefficients={n: f.coefficients[index] for n, f in fit.components.items()},
                rank=row.rank,
                status=row.status,
                hc3_se={n: f.hc3_se[index] for n, f in fit.components.items()},
                ci_low={n: f.ci_low[index] for n, f in fit.components.items()},
                ci_high={n: f.ci_high[index] for n, f in fit.components.items()},
            )
        )
    provisional = outcome.status != "complete"
    return DecisionCreate(
        primary_component=PRIMARY,
        provisional=provisional,
        rows=rows,
        note=_shortfall(outcome) if provisional else None,
    )


def record_gate(
    client: RegistryClient,
    gate: RegistryGate,
    run: GateRunPublic,
    outcome: GateOutcome,
    *,
    round: int,
    move_alias: bool = True,
    empty_bank: EmptyBankPolicy = "keep",
) -> RecordedGate:
    """Store observations and the decision; when complete, the new bank and the alias move.

    A complete gate that selects nothing (every coefficient <= 0) is reported as such
    (`empty_selection`, with a note); `empty_bank` decides whether the empty bank is created
    and adopted (`adopt`) or the alias stays where it was (`keep`)."""
    design = gate.plan.design
    if outcome.pairing is not None and outcome.pairing.observations:
        client.add_observations(
            run.id, [observation_in(design, o) for o in outcome.pairing.observations]
        )
    if outcome.decision is None:
        status = GateStatus.incomplete if outcome.status == "incomplete" else GateStatus.failed
        client.close_gate_run(run.id, status, note=_shortfall(outcome))
        return RecordedGate(run.id, status.value)
    stored = client.post_decision(run.id, decision_create(gate, outcome))
    if stored.provisional:
        return RecordedGate(
            run.id, GateStatus.incomplete.value, decision_id=stored.id, provisional=True
        )

    decision = outcome.decision
    recorded = RecordedGate(run.id, GateStatus.complete.value, decision_id=stored.id)
    if not decision.selection.bank:
        recorded.empty_selection = True
        what = "S_0" if gate.kind.value == "gate_a" else "the next bank"
        recorded.alias_note = f"no chunk has a positive coefficient, so {what} is empty; " + (
            f"no bank created and {gate.alias} left as is (empty_bank=keep)"
            if empty_bank == "keep"
            else "the empty bank is adopted (empty_bank=adopt)"
        )
        if empty_bank == "keep":
            return recorded
    entries = [
        {
            "chunk_version_id": gate.version_ids[entry.intervention_id],
            "rho": decision.next_rho[entry.intervention_id],
            "coefficient": entry.coefficient,
        }
        for entry in decision.selection.bank
    ]
    next_round = gate.bank_round(round)
    bank = client.create_bank(
        entries,
        q=Q_SKILL_FREE if gate.base_bank is None else gate.base_bank.q,
        round=next_round,
        parent_bank_id=None if gate.base_bank is None else gate.base_bank.id,
        gate_decision_id=stored.id,
        note=f"S_{next_round} selected by gate run {run.id} ({gate.kind.value})",
        idempotency_key=f"gate-{run.id}-bank",
    )
    client.freeze_bank(bank.id, idempotency_key=f"gate-{run.id}-freeze")
    recorded.bank_id = bank.id
    reason = f"gate run {run.id} ({gate.kind.value}, round {round}) complete"
    if not move_alias:
        recorded.alias_note = "alias not moved (move_alias off)"
    elif gate.alias_absent:
        try:
            client.create_alias(gate.alias, bank.id, reason=reason, gate_decision_id=stored.id)
            recorded.alias_moved = True
        except Conflict as error:
            recorded.alias_note = f"{gate.alias} was created meanwhile; left as is ({error})"
    elif gate.alias_etag is None:
        recorded.alias_note = f"{gate.alias} did not point at the base bank when the gate started"
    else:
        try:
            client.move_alias(
                gate.alias,
                bank.id,
                reason=reason,
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
    """A stored gate's design (kind, slots, mask seed, split, K), raw observations and solver:
    what `gate refit` needs, all read from the gate run's own fields."""
    if client is None:
        from services.evaluator.settings import EvaluatorSettings

        client = EvaluatorSettings().registry_client()
    try:
        run = client.get_gate_run(int(run_id))
        columns = run.candidate_pool.columns
        views = {
            c.chunk_version_id: client.get_chunk_version_by_id(c.chunk_version_id) for c in columns
        }
        stored = client.list_observations(run.id)
    except (NotFound, ValueError) as error:  # an outage or a refusal is the caller's to report
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
        run.kind.value,  # type: ignore[arg-type]
        tuple(slots),
        mask_seed=run.mask_seed,
        split=run.split,
        budget=run.budget,
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
    return design, observations, run.solver.value  # type: ignore[return-value]
