"""Record a gate in the registry: its run, the raw paired observations, the decision and, when
it is complete, the new bank (adopting that bank is `gate_adoption.py`'s).

Recorded per gate: the gate run with its typed design and identity (kind, pool, split, sample,
mask seed, K, solver, task count, the rollouts' shared identity, the bare baseline), the raw
paired observations, and the decision (coefficients of every component, HC3 SEs and intervals,
ranks and statuses). A complete gate's decision is final: the new bank is created and frozen. An
incomplete gate that could still be fitted stores its fit as a provisional decision, which the
registry closes as incomplete and never lets a bank or an alias move cite; one that could not
be fitted is closed as incomplete or failed. Either way it adopts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.evaluator.decision import EmptyBankPolicy, GateDecision
from services.evaluator.design import DesignError, GateDesign, slot_state
from services.evaluator.fit import PRIMARY, PairedObservation
from services.evaluator.gate_planning import RegistryGate
from services.evaluator.gate_run import GateOutcome, GatePlan
from services.evaluator.pairing import (
    RolloutIdentity,
    RolloutRecord,
    bare_plan_fingerprint,
    records_fingerprint,
)
from shared.contracts.inclusion import Q_SKILL_FREE
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    BankPublic,
    BareBaseline,
    DecisionCreate,
    DecisionRowIn,
    GateIdentity,
    GateRunCreate,
    GateRunPublic,
    GateSolver,
    GateStatus,
    ObservationIn,
    RewardComponents,
)

MAX_NOTE = 4000
FRESH_BARE = "fresh"


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
    empty_bank: EmptyBankPolicy = "keep",
) -> RecordedGate:
    """Store observations and the decision; when complete, create and freeze the new bank.

    A complete gate that selects nothing (every coefficient <= 0) is reported as such
    (`empty_selection`, with a note); `empty_bank` decides whether the empty bank is created
    (`adopt`) or none is (`keep`: the alias stays where it was)."""
    if outcome.pairing is not None and outcome.pairing.observations:
        design = gate.plan.design
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
    recorded = RecordedGate(run.id, GateStatus.complete.value, decision_id=stored.id)
    if not outcome.decision.selection.bank:
        recorded.empty_selection = True
        recorded.alias_note = empty_selection_note(gate, empty_bank)
        if empty_bank == "keep":
            return recorded
    bank = create_selected_bank(client, gate, recorded, outcome.decision, round=round)
    recorded.bank_id = bank.id
    return recorded


def empty_selection_note(gate: RegistryGate, empty_bank: EmptyBankPolicy) -> str:
    what = "S_0" if gate.kind.value == "gate_a" else "the next bank"
    return f"no chunk has a positive coefficient, so {what} is empty; " + (
        f"no bank created and {gate.alias} left as is (empty_bank=keep)"
        if empty_bank == "keep"
        else "the empty bank is adopted (empty_bank=adopt)"
    )


def create_selected_bank(
    client: RegistryClient,
    gate: RegistryGate,
    recorded: RecordedGate,
    decision: GateDecision,
    *,
    round: int,
) -> BankPublic:
    """The gate's selection as a frozen bank citing the decision: S_{t+1} (its base bank's q,
    that bank its parent) or S_0 (q = Q_SKILL_FREE, no parent)."""
    entries = [
        {
            "chunk_version_id": gate.version_ids[entry.intervention_id],
            "rho": decision.next_rho[entry.intervention_id],
            "coefficient": entry.coefficient,
        }
        for entry in decision.selection.bank
    ]
    next_round, run_id = gate.bank_round(round), recorded.gate_run_id
    bank = client.create_bank(
        entries,
        q=Q_SKILL_FREE if gate.base_bank is None else gate.base_bank.q,
        round=next_round,
        parent_bank_id=None if gate.base_bank is None else gate.base_bank.id,
        gate_decision_id=recorded.decision_id,
        note=f"S_{next_round} selected by gate run {run_id} ({gate.kind.value})",
        idempotency_key=f"gate-{run_id}-bank",
    )
    client.freeze_bank(bank.id, idempotency_key=f"gate-{run_id}-freeze")
    return bank
