"""Failure cards (privileged audit kept apart) and candidates (each stored as a chunk version)."""

from __future__ import annotations

from sqlmodel import Session

from services.registry.audit import service as audit
from services.registry.cards import repository
from services.registry.cards.gold import WITHHELD, withhold_gold
from services.registry.cards.models import Candidate, FailureCard
from services.registry.chunks import repository as chunks_repository
from services.registry.chunks import service as chunks
from services.registry.concurrency import conflict_on_integrity
from services.registry.errors import Conflict, FieldInvalid, NotFound
from services.registry.evidence import repository as evidence_repository
from services.registry.models_base import utcnow
from services.registry.pagination import page
from shared.contracts.registry_api.schemas import (
    CandidateCreate,
    CandidateOperation,
    CandidatePublic,
    CandidateStatus,
    CardAuditPublic,
    CardCreate,
    CardOutcome,
    CardPublic,
    ChunkSource,
    DeployableAbstraction,
    FirewallFinding,
    Page,
    Provenance,
)
from shared.kit.auth import Principal
from shared.runtime.leak import find_leaks

_DEPLOYABLE_TEXT = (
    "failure_mechanism",
    "applicable_when",
    "observable_trigger",
    "corrective_procedure",
    "verification_step",
)


def card_public(card: FailureCard) -> CardPublic:
    """The card as every role reads it: no gold (see `gold.py`), no privileged audit."""
    shown = withhold_gold(
        {"deployable": card.deployable, "firewall_findings": card.firewall_findings}
    )
    return CardPublic(
        id=card.id,
        round=card.round,
        task_id=card.task_id,
        checkpoint_id=card.checkpoint_id,
        evidence_id=card.evidence_id,
        outcome=CardOutcome(card.outcome),
        eligible=card.eligible,
        deployable=None
        if shown["deployable"] is None
        else DeployableAbstraction.model_validate(shown["deployable"]),
        firewall_findings=[FirewallFinding.model_validate(f) for f in shown["firewall_findings"]],
        forced_no_proposal_reason=card.forced_no_proposal_reason,
        extras=card.extras,
        created_by=card.created_by,
        created_at=card.created_at,
    )


def _check_card(session: Session, data: CardCreate) -> None:
    body = ("body",)
    if data.outcome == CardOutcome.NO_PROPOSAL:
        if data.eligible:
            raise FieldInvalid((*body, "eligible"), "a NO_PROPOSAL card is never eligible")
    elif data.deployable is None:
        raise FieldInvalid(
            (*body, "deployable"), f"an {data.outcome.value} card needs its deployable abstraction"
        )
    if data.deployable is not None:
        target = data.deployable.target_chunk_id
        target_loc = (*body, "deployable", "target_chunk_id")
        if data.outcome == CardOutcome.REWRITE and target is None:
            raise FieldInvalid(target_loc, "a REWRITE names its target chunk")
        if data.outcome == CardOutcome.ADD and target is not None:
            raise FieldInvalid(target_loc, "an ADD has no target chunk")
        if target is not None and chunks_repository.get_chunk(session, target) is None:
            raise FieldInvalid(target_loc, f"chunk {target} not found")
    if data.eligible and data.firewall_findings:
        raise FieldInvalid((*body, "eligible"), "a card with firewall findings is not eligible")
    if data.eligible and data.deployable is not None:
        # Eligible deployable text may reach a chunk: hold it to the same leak check.
        for name in _DEPLOYABLE_TEXT:
            findings = find_leaks(getattr(data.deployable, name))
            if findings:
                raise FieldInvalid(
                    (*body, "deployable", name),
                    f"leak check: {findings[0].rule} ({findings[0].text!r})",
                    f"leak.{findings[0].rule}",
                )
        if data.deployable.proposed_content is not None:
            chunks.check_content(
                data.deployable.proposed_content, loc=(*body, "deployable", "proposed_content")
            )
    if (
        data.checkpoint_id is not None
        and evidence_repository.get_checkpoint(session, data.checkpoint_id) is None
    ):
        raise FieldInvalid((*body, "checkpoint_id"), f"checkpoint {data.checkpoint_id!r} not found")
    if (
        data.evidence_id is not None
        and evidence_repository.get_group(session, data.evidence_id) is None
    ):
        raise FieldInvalid((*body, "evidence_id"), f"all-wrong group {data.evidence_id} not found")


def create_card(*, session: Session, principal: Principal, data: CardCreate) -> CardPublic:
    """Store a failure card; its privileged audit goes to a table of its own."""
    _check_card(session, data)
    created_at = utcnow()
    deployable = data.deployable
    card_id = repository.insert_card(
        session,
        {
            "round": data.round,
            "task_id": data.task_id,
            "checkpoint_id": data.checkpoint_id,
            "evidence_id": data.evidence_id,
            "outcome": data.outcome.value,
            "eligible": data.eligible,
            "target_chunk_id": None if deployable is None else deployable.target_chunk_id,
            "deployable": None if deployable is None else deployable.model_dump(mode="json"),
            "firewall_findings": [f.model_dump(mode="json") for f in data.firewall_findings],
            "forced_no_proposal_reason": data.forced_no_proposal_reason,
            "extras": data.extras,
            "created_by": principal.name,
            "created_at": created_at,
        },
        data.privileged_audit,
    )
    # Built from the request's already-validated parts: nothing is read back or re-validated.
    # The answer and the audit entry withhold gold like every read does (`gold.py`).
    findings = data.firewall_findings
    result = CardPublic.model_construct(
        id=card_id,
        round=data.round,
        task_id=data.task_id,
        checkpoint_id=data.checkpoint_id,
        evidence_id=data.evidence_id,
        outcome=data.outcome,
        eligible=data.eligible,
        deployable=None if findings else deployable,
        firewall_findings=[f.model_copy(update={"text": WITHHELD}) for f in findings],
        forced_no_proposal_reason=data.forced_no_proposal_reason,
        extras=data.extras,
        created_by=principal.name,
        created_at=created_at,
    )
    # The audit log is readable by every role: it gets the deployable half only.
    audit.record(
        session=session,
        principal=principal,
        action="card.create",
        object_type="card",
        object_id=card_id,
        after=result,
    )
    return result


def get_card(*, session: Session, card_id: int) -> CardPublic:
    """One card without its privileged audit."""
    card = repository.get_card(session, card_id)
    if card is None:
        raise NotFound("failure card", card_id)
    return card_public(card)


def get_card_audit(*, session: Session, card_id: int) -> CardAuditPublic:
    """The gold-aware audit of one card (analysts and operators only): the privileged audit,
    the firewall's findings with the gold they matched, and the deployable text as sent."""
    row = repository.get_card_audit(session, card_id)
    card = repository.get_card(session, card_id)
    if row is None or card is None:
        raise NotFound("failure card", card_id)
    return CardAuditPublic(
        card_id=card_id,
        privileged_audit=row.privileged_audit,
        firewall_findings=[FirewallFinding.model_validate(f) for f in card.firewall_findings],
        deployable=None
        if card.deployable is None
        else DeployableAbstraction.model_validate(card.deployable),
    )


def list_cards(
    *,
    session: Session,
    round: int | None,
    outcome: CardOutcome | None,
    eligible: bool | None,
    task_id: str | None,
    limit: int,
    offset: int,
) -> Page[CardPublic]:
    """Cards by id, filtered."""
    rows, total = repository.list_cards(
        session,
        round=round,
        outcome=None if outcome is None else outcome.value,
        eligible=eligible,
        task_id=task_id,
        limit=limit,
        offset=offset,
    )
    return page([card_public(row) for row in rows], total, limit, offset)


def candidate_public(session: Session, candidate: Candidate) -> CandidatePublic:
    version = chunks.version_views(session, [candidate.chunk_version_id])[
        candidate.chunk_version_id
    ]
    return CandidatePublic(
        id=candidate.id,
        round=candidate.round,
        operation=CandidateOperation(candidate.operation),
        target_chunk_id=candidate.target_chunk_id,
        chunk_id=candidate.chunk_id,
        chunk_version_id=version.id,
        version=version.version,
        signature=candidate.signature,
        source_card_ids=candidate.source_card_ids,
        failure_mechanism=candidate.failure_mechanism,
        proposal_checkpoint=candidate.proposal_checkpoint,
        status=CandidateStatus(candidate.status),
        decision_id=candidate.decision_id,
        created_by=candidate.created_by,
        created_at=candidate.created_at,
    )


def create_candidate(
    *, session: Session, principal: Principal, data: CandidateCreate
) -> CandidatePublic:
    """An ADD (new chunk) or REWRITE (new version of its target), backed by eligible cards."""
    cards = repository.cards_by_id(session, data.source_card_ids)
    cited = repository.citing_candidates(session, data.source_card_ids, round=data.round)
    for index, card_id in enumerate(data.source_card_ids):
        loc = ("body", "source_card_ids", index)
        if card_id not in cards:
            raise FieldInvalid(loc, f"failure card {card_id} not found")
        if not cards[card_id].eligible:
            raise FieldInvalid(loc, f"failure card {card_id} is not eligible for consolidation")
        if card_id in data.source_card_ids[:index]:
            raise FieldInvalid(loc, f"failure card {card_id} is listed twice")
        if card_id in cited:
            raise Conflict(
                f"failure card {card_id} already backs candidate {cited[card_id]} of round "
                f"{data.round}; a card is cited by one candidate per round"
            )
    target_loc = ("body", "target_chunk_id")
    if data.operation == CandidateOperation.ADD:
        if data.target_chunk_id is not None:
            raise FieldInvalid(target_loc, "an ADD has no target chunk")
    else:
        if data.target_chunk_id is None:
            raise FieldInvalid(target_loc, "a REWRITE names its target chunk")
        if chunks_repository.get_chunk(session, data.target_chunk_id) is None:
            raise FieldInvalid(target_loc, f"chunk {data.target_chunk_id} not found")
        if data.slug is not None:
            raise FieldInvalid(("body", "slug"), "a REWRITE keeps its target's slug")
    chunks.check_content(data.content, loc=("body", "content"))
    text_hash = data.content.content_hash()
    if data.operation == CandidateOperation.REWRITE:
        latest = chunks_repository.latest_version(session, data.target_chunk_id)
        if latest is not None and latest.content_hash == text_hash:
            raise FieldInvalid(("body", "content"), "the rewrite equals the target's current text")
    signature = data.signature()
    existing = repository.candidate_by_signature(session, signature)
    if existing is not None:
        raise Conflict(f"the same candidate exists already (candidate {existing.id})")
    if data.operation == CandidateOperation.ADD:
        chunk = chunks.new_chunk(
            session=session, principal=principal, slug=data.slug or f"cand-{signature[:12]}"
        )
    else:
        chunk = chunks.require_chunk(session, data.target_chunk_id)
    candidate = Candidate(
        round=data.round,
        operation=data.operation.value,
        target_chunk_id=data.target_chunk_id,
        chunk_id=chunk.id,
        signature=signature,
        source_card_ids=list(data.source_card_ids),
        failure_mechanism=data.failure_mechanism,
        proposal_checkpoint=data.proposal_checkpoint,
        status=CandidateStatus.proposed.value,
        created_by=principal.name,
    )
    with conflict_on_integrity("the same candidate was stored concurrently", session):
        repository.add(session, candidate)
    # The key (card, round) decides a race between two candidates citing one card.
    with conflict_on_integrity(
        f"a source card was cited concurrently by another candidate of round {data.round}",
        session,
    ):
        repository.cite(session, data.source_card_ids, round=data.round, candidate_id=candidate.id)
    version, _ = chunks.store_version(
        session=session,
        principal=principal,
        chunk=chunk,
        content=data.content,
        source=ChunkSource.analyst,
        provenance=Provenance(card_ids=list(data.source_card_ids), candidate_id=candidate.id),
    )
    candidate.chunk_version_id = version.id
    repository.add(session, candidate)
    result = candidate_public(session, candidate)
    audit.record(
        session=session,
        principal=principal,
        action="candidate.create",
        object_type="candidate",
        object_id=candidate.id,
        after=result,
    )
    return result


def get_candidate(*, session: Session, candidate_id: int) -> CandidatePublic:
    """One candidate."""
    candidate = repository.get_candidate(session, candidate_id)
    if candidate is None:
        raise NotFound("candidate", candidate_id)
    return candidate_public(session, candidate)


def list_candidates(
    *,
    session: Session,
    round: int | None,
    operation: CandidateOperation | None,
    status: CandidateStatus | None,
    limit: int,
    offset: int,
) -> Page[CandidatePublic]:
    """Candidates by id, filtered."""
    rows, total = repository.list_candidates(
        session,
        round=round,
        operation=None if operation is None else operation.value,
        status=None if status is None else status.value,
        limit=limit,
        offset=offset,
    )
    return page([candidate_public(session, row) for row in rows], total, limit, offset)
