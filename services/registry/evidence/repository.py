"""SQL for checkpoints and all-wrong group evidence."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlmodel import Session

from services.registry.evidence.models import AllWrongGroup, Checkpoint


def get_checkpoint(session: Session, checkpoint_id: str) -> Checkpoint | None:
    return session.get(Checkpoint, checkpoint_id)


def get_group(session: Session, group_id: int) -> AllWrongGroup | None:
    return session.get(AllWrongGroup, group_id)


def add(session: Session, row: Checkpoint | AllWrongGroup) -> None:
    session.add(row)
    session.flush()


def settle_retry(session: Session, *, group_id: int, outcome: str, trace_uri: str | None) -> bool:
    """pending -> outcome, once; False when the retry was already settled."""
    values: dict[str, object] = {"retry_outcome": outcome}
    if trace_uri is not None:
        values["retry_trace_uri"] = trace_uri
    result = session.execute(
        update(AllWrongGroup)
        .where(AllWrongGroup.id == group_id, AllWrongGroup.retry_outcome == "pending")
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def list_checkpoints(
    session: Session, *, round: int | None, limit: int, offset: int
) -> tuple[Sequence[Checkpoint], int]:
    filters = [] if round is None else [Checkpoint.round == round]
    total = session.execute(
        select(func.count()).select_from(Checkpoint).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(Checkpoint)
            .where(*filters)
            .order_by(Checkpoint.step, Checkpoint.id)
            .limit(limit)
            .offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def list_groups(
    session: Session,
    *,
    round: int | None,
    checkpoint_id: str | None,
    retry_outcome: str | None,
    task_id: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[AllWrongGroup], int]:
    filters = []
    if round is not None:
        filters.append(AllWrongGroup.round == round)
    if checkpoint_id is not None:
        filters.append(AllWrongGroup.checkpoint_id == checkpoint_id)
    if retry_outcome is not None:
        filters.append(AllWrongGroup.retry_outcome == retry_outcome)
    if task_id is not None:
        filters.append(AllWrongGroup.task_id == task_id)
    total = session.execute(
        select(func.count()).select_from(AllWrongGroup).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(AllWrongGroup)
            .where(*filters)
            .order_by(AllWrongGroup.id)
            .limit(limit)
            .offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total
