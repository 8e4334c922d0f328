"""SQL for aliases and the alias history."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update
from sqlmodel import Session

from services.registry.aliases.models import Alias, AliasEvent


def get(session: Session, name: str) -> Alias | None:
    return session.execute(
        select(Alias).where(Alias.name == name).execution_options(populate_existing=True)
    ).scalar_one_or_none()


def get_for_update(session: Session, name: str) -> Alias | None:
    """The alias, row-locked until commit: concurrent movers queue here and each sees the
    revision the one before it left (so `If-Match: *` movers all succeed, in turn)."""
    return session.execute(
        select(Alias)
        .where(Alias.name == name)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


def names_pointing_at(session: Session, bank_id: int) -> list[str]:
    return list(
        session.execute(
            select(Alias.name).where(Alias.bank_id == bank_id).order_by(Alias.name)
        ).scalars()
    )


def add(session: Session, row: Alias | AliasEvent) -> None:
    session.add(row)
    session.flush()


def compare_and_set(
    session: Session,
    *,
    name: str,
    expected_revision: int,
    bank_id: int,
    actor: str,
    at: datetime,
) -> bool:
    """Move the alias only if it is still at `expected_revision` (one statement, row-locked)."""
    result = session.execute(
        update(Alias)
        .where(Alias.name == name, Alias.revision == expected_revision)
        .values(bank_id=bank_id, revision=expected_revision + 1, updated_by=actor, updated_at=at)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def list_aliases(
    session: Session, *, bank_id: int | None, limit: int, offset: int
) -> tuple[Sequence[Alias], int]:
    filters = [] if bank_id is None else [Alias.bank_id == bank_id]
    total = session.execute(select(func.count()).select_from(Alias).where(*filters)).scalar_one()
    rows = (
        session.execute(
            select(Alias).where(*filters).order_by(Alias.name).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def latest_event(session: Session, name: str) -> AliasEvent | None:
    return session.execute(
        select(AliasEvent)
        .where(AliasEvent.alias == name)
        .order_by(AliasEvent.revision.desc())
        .limit(1)
    ).scalar_one_or_none()


def list_events(
    session: Session, *, name: str, limit: int, offset: int
) -> tuple[Sequence[AliasEvent], int]:
    total = session.execute(
        select(func.count()).select_from(AliasEvent).where(AliasEvent.alias == name)
    ).scalar_one()
    rows = (
        session.execute(
            select(AliasEvent)
            .where(AliasEvent.alias == name)
            .order_by(AliasEvent.revision)
            .limit(limit)
            .offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total
