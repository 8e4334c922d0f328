"""Trainer writes: checkpoints, and all-wrong groups with their full-skill retry outcome."""

from __future__ import annotations

from sqlmodel import Session

from services.registry.audit import service as audit
from services.registry.banks import repository as banks_repository
from services.registry.concurrency import conflict_on_integrity
from services.registry.errors import Conflict, FieldInvalid, NotFound
from services.registry.evidence import repository
from services.registry.evidence.models import AllWrongGroup, Checkpoint
from services.registry.pagination import page
from shared.contracts.registry_api.schemas import (
    BankStatus,
    CheckpointCreate,
    CheckpointPublic,
    EvidenceCreate,
    EvidencePublic,
    EvidenceUpdate,
    Page,
    RetryOutcome,
    TreatmentMode,
)
from shared.kit.auth import Principal


def create_checkpoint(
    *, session: Session, principal: Principal, data: CheckpointCreate
) -> CheckpointPublic:
    """Register a checkpoint; its id is unique (409 when taken)."""
    if repository.get_checkpoint(session, data.id) is not None:
        raise Conflict(f"checkpoint {data.id!r} exists")
    row = Checkpoint(
        id=data.id, uri=data.uri, step=data.step, round=data.round, created_by=principal.name
    )
    with conflict_on_integrity(f"checkpoint {data.id!r} was registered concurrently", session):
        repository.add(session, row)
    result = CheckpointPublic.model_validate(row)
    audit.record(
        session=session,
        principal=principal,
        action="checkpoint.create",
        object_type="checkpoint",
        object_id=row.id,
        after=result,
    )
    return result


def get_checkpoint(*, session: Session, checkpoint_id: str) -> CheckpointPublic:
    """One checkpoint."""
    row = repository.get_checkpoint(session, checkpoint_id)
    if row is None:
        raise NotFound("checkpoint", checkpoint_id)
    return CheckpointPublic.model_validate(row)


def list_checkpoints(
    *, session: Session, round: int | None, limit: int, offset: int
) -> Page[CheckpointPublic]:
    """Checkpoints by step."""
    rows, total = repository.list_checkpoints(session, round=round, limit=limit, offset=offset)
    return page([CheckpointPublic.model_validate(row) for row in rows], total, limit, offset)


def create_group(*, session: Session, principal: Principal, data: EvidenceCreate) -> EvidencePublic:
    """Record an all-wrong group under the frozen bank and checkpoint it was trained with."""
    bank = banks_repository.get(session, data.bank_id)
    if bank is None:
        raise FieldInvalid(("body", "bank_id"), f"bank {data.bank_id} not found")
    if bank.status == BankStatus.draft:
        raise FieldInvalid(("body", "bank_id"), "training runs under a frozen bank, not a draft")
    if repository.get_checkpoint(session, data.checkpoint_id) is None:
        raise FieldInvalid(
            ("body", "checkpoint_id"), f"checkpoint {data.checkpoint_id!r} not found"
        )
    n_entries = len(banks_repository.entries(session, data.bank_id))
    inclusion = data.treatment.inclusion
    loc = ("body", "treatment", "inclusion")
    if len(inclusion) != n_entries:
        raise FieldInvalid(
            loc, f"inclusion has {len(inclusion)} entries; the bank has {n_entries} chunks"
        )
    if data.treatment.mode == TreatmentMode.skill_free and any(inclusion):
        raise FieldInvalid(loc, "a skill-free group includes no chunk")
    if data.treatment.mode == TreatmentMode.assisted_empty and any(inclusion):
        raise FieldInvalid(loc, "an assisted_empty group drew no chunk")
    if data.treatment.mode == TreatmentMode.assisted and not any(inclusion):
        raise FieldInvalid(
            loc, "an assisted group includes at least one chunk (else assisted_empty)"
        )
    row = AllWrongGroup(
        task_id=data.task_id,
        round=data.round,
        step=data.step,
        group_index=data.group_index,
        treatment=data.treatment.model_dump(mode="json"),
        bank_id=data.bank_id,
        checkpoint_id=data.checkpoint_id,
        retry_outcome=data.retry_outcome.value,
        retry_trace_uri=data.retry_trace_uri,
        created_by=principal.name,
    )
    repository.add(session, row)
    result = EvidencePublic.model_validate(row)
    audit.record(
        session=session,
        principal=principal,
        action="evidence.create",
        object_type="all_wrong_group",
        object_id=row.id,
        after=result,
    )
    return result


def settle_retry(
    *, session: Session, principal: Principal, group_id: int, data: EvidenceUpdate
) -> EvidencePublic:
    """Record the retry outcome of a pending group (409 once settled)."""
    row = repository.get_group(session, group_id)
    if row is None:
        raise NotFound("all-wrong group", group_id)
    if data.retry_outcome == RetryOutcome.pending:
        raise FieldInvalid(
            ("body", "retry_outcome"), "settle a retry with its outcome, not pending"
        )
    before = EvidencePublic.model_validate(row)
    if not repository.settle_retry(
        session, group_id=group_id, outcome=data.retry_outcome.value, trace_uri=data.retry_trace_uri
    ):
        raise Conflict(f"all-wrong group {group_id} retry is already {row.retry_outcome}")
    session.refresh(row)
    after = EvidencePublic.model_validate(row)
    audit.record(
        session=session,
        principal=principal,
        action="evidence.settle",
        object_type="all_wrong_group",
        object_id=group_id,
        before=before,
        after=after,
    )
    return after


def get_group(*, session: Session, group_id: int) -> EvidencePublic:
    """One all-wrong group."""
    row = repository.get_group(session, group_id)
    if row is None:
        raise NotFound("all-wrong group", group_id)
    return EvidencePublic.model_validate(row)


def list_groups(
    *,
    session: Session,
    round: int | None,
    checkpoint_id: str | None,
    retry_outcome: RetryOutcome | None,
    task_id: str | None,
    limit: int,
    offset: int,
) -> Page[EvidencePublic]:
    """All-wrong groups by id, filtered."""
    rows, total = repository.list_groups(
        session,
        round=round,
        checkpoint_id=checkpoint_id,
        retry_outcome=None if retry_outcome is None else retry_outcome.value,
        task_id=task_id,
        limit=limit,
        offset=offset,
    )
    return page([EvidencePublic.model_validate(row) for row in rows], total, limit, offset)
