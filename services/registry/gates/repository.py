"""SQL for gate runs, observations and decisions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import func, select, update
from sqlmodel import Session

from services.registry.gates.models import GateDecision, GateDecisionRow, GateObservation, GateRun


def get_run(session: Session, run_id: int) -> GateRun | None:
    return session.get(GateRun, run_id)


def get_run_for_update(session: Session, run_id: int) -> GateRun | None:
    """The run, row-locked until commit: writes to one gate (observation batches, decisions,
    closing) queue here, so its task cap and status checks see every earlier write."""
    return session.get(GateRun, run_id, with_for_update=True, populate_existing=True)


def get_decision(session: Session, decision_id: int) -> GateDecision | None:
    return session.get(GateDecision, decision_id)


def decision_for_run(session: Session, run_id: int) -> GateDecision | None:
    return session.execute(
        select(GateDecision).where(GateDecision.gate_run_id == run_id)
    ).scalar_one_or_none()


def decision_ids_for_runs(session: Session, run_ids: Iterable[int]) -> dict[int, int]:
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(GateDecision.gate_run_id, GateDecision.id).where(GateDecision.gate_run_id.in_(ids))
    ).all()
    return dict(rows)


def decision_rows(session: Session, decision_id: int) -> Sequence[GateDecisionRow]:
    return (
        session.execute(
            select(GateDecisionRow)
            .where(GateDecisionRow.decision_id == decision_id)
            .order_by(GateDecisionRow.id)
        )
        .scalars()
        .all()
    )


def add(session: Session, row: GateRun | GateDecision) -> None:
    session.add(row)
    session.flush()


def add_all(session: Session, rows: Iterable[GateObservation | GateDecisionRow]) -> None:
    session.add_all(list(rows))
    session.flush()


def observation_counts(session: Session, run_ids: Iterable[int]) -> dict[int, int]:
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(GateObservation.gate_run_id, func.count())
        .where(GateObservation.gate_run_id.in_(ids))
        .group_by(GateObservation.gate_run_id)
    ).all()
    return dict(rows)


def existing_observation_keys(
    session: Session, run_id: int, keys: Iterable[tuple[str, int]]
) -> set[tuple[str, int]]:
    task_ids = sorted({task for task, _ in keys})
    if not task_ids:
        return set()
    rows = session.execute(
        select(GateObservation.task_id, GateObservation.sample_id).where(
            GateObservation.gate_run_id == run_id, GateObservation.task_id.in_(task_ids)
        )
    ).all()
    return {(task, sample) for task, sample in rows}


def transition(
    session: Session, *, run_id: int, from_status: str, to_status: str, note: str | None
) -> bool:
    values: dict[str, object] = {"status": to_status}
    if note is not None:
        values["note"] = note
    result = session.execute(
        update(GateRun)
        .where(GateRun.id == run_id, GateRun.status == from_status)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def list_runs(
    session: Session,
    *,
    kind: str | None,
    round: int | None,
    status: str | None,
    checkpoint_id: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[GateRun], int]:
    filters = []
    if kind is not None:
        filters.append(GateRun.kind == kind)
    if round is not None:
        filters.append(GateRun.round == round)
    if status is not None:
        filters.append(GateRun.status == status)
    if checkpoint_id is not None:
        filters.append(GateRun.checkpoint_id == checkpoint_id)
    total = session.execute(select(func.count()).select_from(GateRun).where(*filters)).scalar_one()
    rows = (
        session.execute(
            select(GateRun).where(*filters).order_by(GateRun.id).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def list_observations(
    session: Session, *, run_id: int, task_id: str | None, limit: int, offset: int
) -> tuple[Sequence[GateObservation], int]:
    filters = [GateObservation.gate_run_id == run_id]
    if task_id is not None:
        filters.append(GateObservation.task_id == task_id)
    total = session.execute(
        select(func.count()).select_from(GateObservation).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(GateObservation)
            .where(*filters)
            .order_by(GateObservation.id)
            .limit(limit)
            .offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total
