"""Gate runs: the candidate pool, raw per-task observations (so any decision can be re-fit),
and the decision with one row per pool column."""

from __future__ import annotations

from collections import defaultdict

from sqlmodel import Session

from services.registry.audit import service as audit
from services.registry.banks import repository as banks_repository
from services.registry.cards import repository as cards_repository
from services.registry.cards.models import Candidate
from services.registry.chunks import service as chunks
from services.registry.concurrency import conflict_on_integrity
from services.registry.errors import Conflict, FieldInvalid, NotFound
from services.registry.evidence import repository as evidence_repository
from services.registry.gates import repository
from services.registry.gates.models import GateDecision, GateDecisionRow, GateObservation, GateRun
from services.registry.pagination import page
from shared.contracts.registry_api.schemas import (
    REWARD_COMPONENTS,
    BankStatus,
    BareBaseline,
    CandidatePool,
    CandidateStatus,
    ChunkSource,
    DecisionCreate,
    DecisionPublic,
    DecisionRowIn,
    DecisionRowPublic,
    DecisionStatus,
    GateIdentity,
    GateKind,
    GateRunCreate,
    GateRunPublic,
    GateRunUpdate,
    GateSolver,
    GateStatus,
    ObservationBatch,
    ObservationBatchResult,
    ObservationPublic,
    Page,
    PoolColumn,
    PoolColumnKind,
)
from shared.kit.auth import Principal

POOL = ("body", "candidate_pool", "columns")


def require_run(session: Session, run_id: int, *, lock: bool = False) -> GateRun:
    run = (repository.get_run_for_update if lock else repository.get_run)(session, run_id)
    if run is None:
        raise NotFound("gate run", run_id)
    return run


def _pool(run: GateRun) -> CandidatePool:
    return CandidatePool.model_validate(run.candidate_pool)


def _slots(pool: CandidatePool) -> list[list[int]]:
    """Column indexes of each slot, slot by slot (a family lists old then its rewrites)."""
    slots: dict[int, list[int]] = defaultdict(list)
    for index, column in enumerate(pool.columns):
        slots[column.slot].append(index)
    return [slots[slot] for slot in sorted(slots)]


def _candidate_versions(pool: CandidatePool) -> set[int]:
    """The versions a gate decides as candidates: every column but the base bank's current
    ones (a current version was settled by the gate that admitted it, if by any)."""
    return {c.chunk_version_id for c in pool.columns if c.kind != PoolColumnKind.current}


def _require_proposed(candidate: Candidate, loc: tuple) -> None:
    """422 at `loc` unless the candidate still waits for its gate: a gate may not re-decide
    what another gate settled."""
    if candidate.status != CandidateStatus.proposed:
        raise FieldInvalid(
            loc,
            f"candidate {candidate.id} is already {candidate.status} (decision "
            f"{candidate.decision_id}); a gate's pool holds proposed candidates only",
        )


def _check_pool(session: Session, pool: CandidatePool, kind: GateKind) -> None:
    columns = pool.columns
    views = chunks.require_versions(
        session, [c.chunk_version_id for c in columns], loc=lambda i: (*POOL, i, "chunk_version_id")
    )
    seen: set[int] = set()
    for index, column in enumerate(columns):
        if column.chunk_version_id in seen:
            raise FieldInvalid(
                (*POOL, index, "chunk_version_id"), "a version appears twice in the pool"
            )
        seen.add(column.chunk_version_id)
        is_draft = column.kind == PoolColumnKind.draft
        if kind == GateKind.gate_a and not is_draft:
            raise FieldInvalid((*POOL, index, "kind"), "a Gate A pool holds draft columns only")
        if kind == GateKind.online and is_draft:
            raise FieldInvalid((*POOL, index, "kind"), "draft columns belong to Gate A")
        if is_draft and views[column.chunk_version_id].source != ChunkSource.cold_start:
            raise FieldInvalid(
                (*POOL, index, "chunk_version_id"),
                f"a draft column needs a cold_start version, not "
                f"{views[column.chunk_version_id].source.value}",
            )
        if column.candidate_id is not None:
            candidate = cards_repository.get_candidate(session, column.candidate_id)
            if candidate is None:
                raise FieldInvalid(
                    (*POOL, index, "candidate_id"), f"candidate {column.candidate_id} not found"
                )
            _require_proposed(candidate, (*POOL, index, "candidate_id"))
    for candidate in cards_repository.candidates_of_versions(session, _candidate_versions(pool)):
        index = next(
            i for i, c in enumerate(columns) if c.chunk_version_id == candidate.chunk_version_id
        )
        _require_proposed(candidate, (*POOL, index, "chunk_version_id"))
    slot_numbers = sorted({c.slot for c in columns})
    if slot_numbers != list(range(len(slot_numbers))):
        raise FieldInvalid((*POOL,), "slots must be numbered 0..S-1 without gaps")
    for members in _slots(pool):
        kinds = [columns[i].kind for i in members]
        if len(members) == 1:
            if kinds[0] == PoolColumnKind.rewrite:
                raise FieldInvalid(
                    (*POOL, members[0], "kind"), "a rewrite needs its old version in the same slot"
                )
            continue
        # A replacement family: the current (old) version and its rewrites, one logical chunk.
        if (
            kinds.count(PoolColumnKind.current) != 1
            or kinds.count(PoolColumnKind.rewrite) != len(members) - 1
        ):
            raise FieldInvalid(
                (*POOL, members[0], "slot"),
                "a shared slot holds one current version and its rewrites",
            )
        chunk_ids = {views[columns[i].chunk_version_id].chunk_id for i in members}
        if len(chunk_ids) != 1:
            raise FieldInvalid(
                (*POOL, members[1], "chunk_version_id"), "a family's versions must share one chunk"
            )


def run_public(
    session: Session, run: GateRun, n_observations: int | None = None, decision_id: int | None = -1
) -> GateRunPublic:
    if n_observations is None:
        n_observations = repository.observation_counts(session, [run.id]).get(run.id, 0)
    if decision_id == -1:
        decision = repository.decision_for_run(session, run.id)
        decision_id = None if decision is None else decision.id
    return GateRunPublic(
        id=run.id,
        kind=GateKind(run.kind),
        round=run.round,
        checkpoint_id=run.checkpoint_id,
        base_bank_id=run.base_bank_id,
        candidate_pool=_pool(run),
        split=run.split,
        sample_id=run.sample_id,
        mask_seed=run.mask_seed,
        budget=run.budget,
        solver=GateSolver(run.solver),
        n_tasks=run.n_tasks,
        identity=None if run.identity is None else GateIdentity.model_validate(run.identity),
        bare_baseline=(
            None if run.bare_baseline is None else BareBaseline.model_validate(run.bare_baseline)
        ),
        status=GateStatus(run.status),
        note=run.note,
        n_observations=n_observations,
        decision_id=decision_id,
        created_by=run.created_by,
        created_at=run.created_at,
    )


def create_run(*, session: Session, principal: Principal, data: GateRunCreate) -> GateRunPublic:
    """Open a gate run over a validated candidate pool (online: against a frozen base bank;
    Gate A: over cold-start drafts, no base bank)."""
    if evidence_repository.get_checkpoint(session, data.checkpoint_id) is None:
        raise FieldInvalid(
            ("body", "checkpoint_id"), f"checkpoint {data.checkpoint_id!r} not found"
        )
    if data.kind == GateKind.gate_a:
        if data.base_bank_id is not None:
            raise FieldInvalid(
                ("body", "base_bank_id"), "Gate A has no base bank: its pool is cold-start drafts"
            )
    elif data.base_bank_id is None:
        raise FieldInvalid(("body", "base_bank_id"), "an online gate needs its frozen base bank")
    else:
        bank = banks_repository.get(session, data.base_bank_id)
        if bank is None:
            raise FieldInvalid(("body", "base_bank_id"), f"bank {data.base_bank_id} not found")
        if bank.status == BankStatus.draft:
            raise FieldInvalid(("body", "base_bank_id"), "a gate runs against a frozen bank")
    _check_pool(session, data.candidate_pool, data.kind)
    run = GateRun(
        kind=data.kind.value,
        round=data.round,
        checkpoint_id=data.checkpoint_id,
        base_bank_id=data.base_bank_id,
        candidate_pool=data.candidate_pool.model_dump(mode="json"),
        split=data.split,
        sample_id=data.sample_id,
        mask_seed=data.mask_seed,
        budget=data.budget,
        solver=data.solver.value,
        n_tasks=data.n_tasks,
        identity=data.identity.model_dump(mode="json"),
        bare_baseline=data.bare_baseline.model_dump(mode="json"),
        status=GateStatus.open.value,
        note=data.note,
        created_by=principal.name,
    )
    repository.add(session, run)
    result = run_public(session, run, 0, None)
    audit.record(
        session=session,
        principal=principal,
        action="gate_run.create",
        object_type="gate_run",
        object_id=run.id,
        after=result,
    )
    return result


def update_run(
    *, session: Session, principal: Principal, run_id: int, data: GateRunUpdate
) -> GateRunPublic:
    """Close an open gate without a decision: incomplete or failed (409 otherwise)."""
    run = require_run(session, run_id, lock=True)
    if data.status not in (GateStatus.incomplete, GateStatus.failed):
        raise FieldInvalid(
            ("body", "status"), "only incomplete or failed; a decision completes a gate"
        )
    before = run_public(session, run)
    if not repository.transition(
        session,
        run_id=run_id,
        from_status=GateStatus.open.value,
        to_status=data.status.value,
        note=data.note,
    ):
        raise Conflict(f"gate run {run_id} is {run.status}; only an open gate can be closed")
    session.refresh(run)
    after = run_public(session, run)
    audit.record(
        session=session,
        principal=principal,
        action="gate_run.close",
        object_type="gate_run",
        object_id=run_id,
        before=before,
        after=after,
    )
    return after


def _check_observation(
    run: GateRun, pool: CandidatePool, slots: list[list[int]], index: int, obs
) -> None:
    loc = ("body", "observations", index)
    if obs.sample_id != run.sample_id:
        raise FieldInvalid(
            (*loc, "sample_id"), f"the gate runs sample {run.sample_id}, not {obs.sample_id}"
        )
    if len(obs.inclusion) != len(pool.columns):
        raise FieldInvalid(
            (*loc, "inclusion"),
            f"inclusion has {len(obs.inclusion)} entries; the pool has {len(pool.columns)} columns",
        )
    for members in slots:
        if sum(obs.inclusion[i] for i in members) > 1:
            raise FieldInvalid(
                (*loc, "inclusion"), "two versions of one replacement family in one mask"
            )
    if obs.slot_states is None:
        return
    if len(obs.slot_states) != len(slots):
        raise FieldInvalid(
            (*loc, "slot_states"),
            f"slot_states has {len(obs.slot_states)} entries; the pool has {len(slots)} slots",
        )
    for slot, (members, state) in enumerate(zip(slots, obs.slot_states, strict=True)):
        if state > len(members):
            raise FieldInvalid(
                (*loc, "slot_states", slot),
                f"state {state} exceeds the slot's {len(members)} versions",
            )
        expected = [1 if state == position + 1 else 0 for position in range(len(members))]
        if [obs.inclusion[i] for i in members] != expected:
            raise FieldInvalid(
                (*loc, "slot_states", slot), "slot state disagrees with the inclusion vector"
            )


def add_observations(
    *, session: Session, principal: Principal, run_id: int, data: ObservationBatch
) -> ObservationBatchResult:
    """Store raw paired observations of an open gate; a (task, sample) seen twice is a 409."""
    run = require_run(session, run_id, lock=True)
    if run.status != GateStatus.open:
        raise Conflict(f"gate run {run_id} is {run.status}; observations go to an open gate")
    pool = _pool(run)
    slots = _slots(pool)
    keys: set[tuple[str, int]] = set()
    for index, obs in enumerate(data.observations):
        _check_observation(run, pool, slots, index, obs)
        key = (obs.task_id, obs.sample_id)
        if key in keys:
            raise Conflict(
                f"task {obs.task_id!r} sample {obs.sample_id} appears twice in the batch"
            )
        keys.add(key)
    duplicates = repository.existing_observation_keys(session, run_id, keys)
    if duplicates:
        task, sample = sorted(duplicates)[0]
        raise Conflict(f"gate run {run_id} already has task {task!r} sample {sample}")
    stored = repository.observation_counts(session, [run_id]).get(run_id, 0)
    if run.n_tasks is not None and stored + len(keys) > run.n_tasks:
        raise Conflict(
            f"gate run {run_id} planned {run.n_tasks} tasks and has {stored}; "
            f"{len(keys)} more would exceed them"
        )
    with conflict_on_integrity(f"gate run {run_id} got the same task concurrently", session):
        repository.add_all(
            session,
            [
                GateObservation(
                    gate_run_id=run_id,
                    task_id=obs.task_id,
                    sample_id=obs.sample_id,
                    inclusion=list(obs.inclusion),
                    slot_states=None if obs.slot_states is None else list(obs.slot_states),
                    bare=obs.bare.model_dump(),
                    masked=obs.masked.model_dump(),
                )
                for obs in data.observations
            ],
        )
    total = repository.observation_counts(session, [run_id]).get(run_id, 0)
    audit.record(
        session=session,
        principal=principal,
        action="gate_run.observations",
        object_type="gate_run",
        object_id=run_id,
        after={"accepted": len(data.observations), "task_ids": sorted(k[0] for k in keys)[:50]},
    )
    return ObservationBatchResult(
        gate_run_id=run_id, accepted=len(data.observations), n_observations=total
    )


def list_observations(
    *, session: Session, run_id: int, task_id: str | None, limit: int, offset: int
) -> Page[ObservationPublic]:
    """A gate's raw observations in arrival order (what a re-fit reads)."""
    require_run(session, run_id)
    rows, total = repository.list_observations(
        session, run_id=run_id, task_id=task_id, limit=limit, offset=offset
    )
    return page([ObservationPublic.model_validate(row) for row in rows], total, limit, offset)


def _check_components(
    values: dict[str, float] | None, loc: tuple, *, require_primary: str | None
) -> None:
    if values is None:
        return
    for key in values:
        if key not in REWARD_COMPONENTS:
            raise FieldInvalid((*loc, key), f"unknown reward component {key!r}")
    if require_primary and require_primary not in values:
        raise FieldInvalid(loc, f"coefficients must include {require_primary!r}")


# a candidate the gate did not keep: beta <= 0, cut by the budget, or a lower bound <= 0
NOT_KEPT_CANDIDATE = (
    DecisionStatus.non_positive,
    DecisionStatus.budget_excluded,
    DecisionStatus.below_bound,
)


def _check_status(
    row: DecisionRowIn, column: PoolColumn, family_sizes: dict[int, int], primary: str, loc: tuple
) -> None:
    """The selection rule's status taxonomy, checked against the column and its coefficient."""
    beta = row.coefficients.get(primary, 0.0)
    status = row.status
    problem = None
    if status == DecisionStatus.selected and (row.rank is None or beta <= 0):
        problem = "a selected version has a rank and a strictly positive coefficient"
    elif status == DecisionStatus.retired and column.kind != PoolColumnKind.current:
        problem = "only a current version retires; a candidate is non_positive or budget_excluded"
    elif status in NOT_KEPT_CANDIDATE and column.kind == PoolColumnKind.current:
        problem = "a current version that is not kept retires"
    elif status == DecisionStatus.non_positive and beta > 0:
        problem = "non_positive needs a coefficient <= 0"
    elif status == DecisionStatus.budget_excluded and beta <= 0:
        problem = "budget_excluded needs a positive coefficient (else non_positive)"
    elif status == DecisionStatus.below_bound and beta <= 0:
        problem = "below_bound needs a positive coefficient (else non_positive)"
    elif status == DecisionStatus.rewrite_loser and family_sizes[column.slot] < 2:
        problem = "rewrite_loser is for versions in a replacement family"
    if problem:
        raise FieldInvalid((*loc, "status"), problem)


def decision_public(session: Session, decision: GateDecision) -> DecisionPublic:
    rows = repository.decision_rows(session, decision.id)
    views = chunks.version_views(session, [row.chunk_version_id for row in rows])
    return DecisionPublic(
        id=decision.id,
        gate_run_id=decision.gate_run_id,
        estimator=decision.estimator,
        primary_component=decision.primary_component,
        provisional=decision.provisional,
        n_observations=decision.n_observations,
        note=decision.note,
        rows=[
            DecisionRowPublic(
                chunk_version_id=row.chunk_version_id,
                chunk_id=views[row.chunk_version_id].chunk_id,
                slug=views[row.chunk_version_id].slug,
                version=views[row.chunk_version_id].version,
                kind=PoolColumnKind(row.kind),
                slot=row.slot,
                coefficients=row.coefficients,
                rank=row.rank,
                status=DecisionStatus(row.status),
                hc3_se=row.hc3_se,
                ci_low=row.ci_low,
                ci_high=row.ci_high,
            )
            for row in rows
        ],
        created_by=decision.created_by,
        created_at=decision.created_at,
    )


def post_decision(
    *, session: Session, principal: Principal, run_id: int, data: DecisionCreate
) -> DecisionPublic:
    """Record the decision for every pool column (once per gate): a final one completes the
    gate, a provisional one closes it as incomplete and settles nothing."""
    run = require_run(session, run_id, lock=True)
    if run.status != GateStatus.open:
        raise Conflict(f"gate run {run_id} is {run.status}; a decision closes an open gate")
    if data.primary_component not in REWARD_COMPONENTS:
        raise FieldInvalid(
            ("body", "primary_component"), f"unknown reward component {data.primary_component!r}"
        )
    columns: dict[int, PoolColumn] = {c.chunk_version_id: c for c in _pool(run).columns}
    family_sizes: dict[int, int] = defaultdict(int)
    for column in columns.values():
        family_sizes[column.slot] += 1
    seen: set[int] = set()
    for index, row in enumerate(data.rows):
        loc = ("body", "rows", index)
        if row.chunk_version_id not in columns:
            raise FieldInvalid(
                (*loc, "chunk_version_id"),
                f"version {row.chunk_version_id} is not in the gate's pool",
            )
        if row.chunk_version_id in seen:
            raise FieldInvalid(
                (*loc, "chunk_version_id"), "a version appears twice in the decision"
            )
        seen.add(row.chunk_version_id)
        _check_components(
            row.coefficients, (*loc, "coefficients"), require_primary=data.primary_component
        )
        for name in ("hc3_se", "ci_low", "ci_high"):
            _check_components(getattr(row, name), (*loc, name), require_primary=None)
        _check_status(row, columns[row.chunk_version_id], family_sizes, data.primary_component, loc)
    missing = [vid for vid in columns if vid not in seen]
    if missing:
        raise FieldInvalid(("body", "rows"), f"no row for pool version(s) {missing}")
    n_observations = repository.observation_counts(session, [run_id]).get(run_id, 0)
    if n_observations == 0:
        raise Conflict(f"gate run {run_id} has no observations to decide on")
    if not data.provisional and run.n_tasks is not None and n_observations < run.n_tasks:
        raise Conflict(
            f"gate run {run_id} has {n_observations} of its {run.n_tasks} tasks; a final "
            "decision needs them all (post the fit as provisional)"
        )
    decision = GateDecision(
        gate_run_id=run_id,
        estimator=data.estimator,
        primary_component=data.primary_component,
        provisional=data.provisional,
        n_observations=n_observations,
        note=data.note,
        created_by=principal.name,
    )
    with conflict_on_integrity(f"gate run {run_id} was decided concurrently", session):
        repository.add(session, decision)
    repository.add_all(
        session,
        [
            GateDecisionRow(
                decision_id=decision.id,
                chunk_version_id=row.chunk_version_id,
                kind=columns[row.chunk_version_id].kind.value,
                slot=columns[row.chunk_version_id].slot,
                coefficients=dict(row.coefficients),
                rank=row.rank,
                status=row.status.value,
                hc3_se=row.hc3_se,
                ci_low=row.ci_low,
                ci_high=row.ci_high,
            )
            for row in data.rows
        ],
    )
    closed = GateStatus.incomplete if data.provisional else GateStatus.complete
    if not repository.transition(
        session, run_id=run_id, from_status=GateStatus.open.value, to_status=closed.value, note=None
    ):
        raise Conflict(f"gate run {run_id} changed status concurrently")
    if not data.provisional:  # a provisional fit leaves the candidates for a later gate
        _settle_pool_candidates(session, run_id, decision.id, _pool(run), data.rows)
    result = decision_public(session, decision)
    audit.record(
        session=session,
        principal=principal,
        action="gate_decision.create",
        object_type="gate_decision",
        object_id=decision.id,
        after=result,
    )
    return result


def _settle_pool_candidates(
    session: Session, run_id: int, decision_id: int, pool: CandidatePool, rows: list[DecisionRowIn]
) -> None:
    """Settle the candidates of the pool's candidate columns, each exactly once: 409 when
    another gate sharing one settled it first (before this decision, or concurrently)."""
    versions = _candidate_versions(pool)
    candidates = cards_repository.candidates_of_versions(session, versions)
    for candidate in candidates:
        if candidate.status != CandidateStatus.proposed:
            raise Conflict(
                f"candidate {candidate.id} of gate run {run_id} was already {candidate.status} "
                f"by decision {candidate.decision_id} of another gate; this gate can only be "
                "closed provisionally or as incomplete"
            )
    selected = {r.chunk_version_id for r in rows if r.status == DecisionStatus.selected}
    settled = cards_repository.settle_candidates(
        session,
        decision_id=decision_id,
        selected=versions & selected,
        rejected=versions - selected,
    )
    if settled != len(candidates):
        raise Conflict(
            f"a candidate of gate run {run_id} was settled concurrently by another gate's "
            "decision; this gate can only be closed provisionally or as incomplete"
        )


def get_run(*, session: Session, run_id: int) -> GateRunPublic:
    """One gate run with its observation count and decision id."""
    return run_public(session, require_run(session, run_id))


def list_runs(
    *,
    session: Session,
    kind: GateKind | None,
    round: int | None,
    status: GateStatus | None,
    checkpoint_id: str | None,
    limit: int,
    offset: int,
) -> Page[GateRunPublic]:
    """Gate runs by id, filtered."""
    rows, total = repository.list_runs(
        session,
        kind=None if kind is None else kind.value,
        round=round,
        status=None if status is None else status.value,
        checkpoint_id=checkpoint_id,
        limit=limit,
        offset=offset,
    )
    ids = [run.id for run in rows]
    counts = repository.observation_counts(session, ids)
    decisions = repository.decision_ids_for_runs(session, ids)
    items = [run_public(session, run, counts.get(run.id, 0), decisions.get(run.id)) for run in rows]
    return page(items, total, limit, offset)


def require_final_decision(session: Session, decision_id: int, loc: tuple) -> None:
    """422 at `loc` unless the decision exists and is final: banks and alias moves may cite
    only a decision that completed its gate, never a provisional one."""
    decision = repository.get_decision(session, decision_id)
    if decision is None:
        raise FieldInvalid(loc, f"gate decision {decision_id} not found")
    if decision.provisional:
        raise FieldInvalid(
            loc,
            f"gate decision {decision_id} is provisional (its gate is incomplete); "
            "nothing may be adopted from it",
        )


def get_decision(*, session: Session, decision_id: int) -> DecisionPublic:
    """One decision with its rows."""
    decision = repository.get_decision(session, decision_id)
    if decision is None:
        raise NotFound("gate decision", decision_id)
    return decision_public(session, decision)


def get_run_decision(*, session: Session, run_id: int) -> DecisionPublic:
    """The decision of a gate run (404 until there is one)."""
    require_run(session, run_id)
    decision = repository.decision_for_run(session, run_id)
    if decision is None:
        raise NotFound("decision of gate run", run_id)
    return decision_public(session, decision)
