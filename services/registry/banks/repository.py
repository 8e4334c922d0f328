"""SQL for banks and bank entries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlmodel import Session

from services.registry.banks.models import Bank, BankEntry


def get(session: Session, bank_id: int) -> Bank | None:
    return session.get(Bank, bank_id)


def get_for_update(session: Session, bank_id: int) -> Bank | None:
    """The bank, row-locked until commit (a concurrent freeze waits, then this sees it)."""
    return session.get(Bank, bank_id, with_for_update=True, populate_existing=True)


def lock_in_id_order(session: Session, bank_ids: Iterable[int]) -> None:
    """Row-lock banks lowest id first, so two writers that each touch both never deadlock.

    (A PATCH that sets a parent takes a key-share lock on the parent through its foreign key;
    two drafts made each other's parent at once then each waited for the other.)
    """
    ids = sorted(set(bank_ids))
    session.execute(select(Bank.id).where(Bank.id.in_(ids)).order_by(Bank.id).with_for_update())


def get_for_share(session: Session, bank_id: int) -> Bank | None:
    """The bank, share-locked until commit (a concurrent retire or freeze waits for us)."""
    return session.get(Bank, bank_id, with_for_update={"read": True}, populate_existing=True)


def ancestors(session: Session, bank_id: int, limit: int = 10_000) -> list[int]:
    """The chain of parent ids above `bank_id`, nearest first (stops at a repeat or `limit`)."""
    chain: list[int] = []
    current = session.execute(select(Bank.parent_bank_id).where(Bank.id == bank_id)).scalar()
    while current is not None and current not in chain and len(chain) < limit:
        chain.append(current)
        current = session.execute(select(Bank.parent_bank_id).where(Bank.id == current)).scalar()
    return chain


def existing_ids(session: Session, bank_ids: Iterable[int]) -> set[int]:
    ids = sorted(set(bank_ids))
    if not ids:
        return set()
    return set(session.execute(select(Bank.id).where(Bank.id.in_(ids))).scalars())


def add(session: Session, bank: Bank) -> None:
    session.add(bank)
    session.flush()


def add_entries(session: Session, entries: Iterable[BankEntry]) -> None:
    session.add_all(list(entries))
    session.flush()


def delete_entries(session: Session, bank_id: int) -> None:
    session.execute(delete(BankEntry).where(BankEntry.bank_id == bank_id))
    session.flush()


def entries(session: Session, bank_id: int) -> Sequence[BankEntry]:
    return (
        session.execute(
            select(BankEntry).where(BankEntry.bank_id == bank_id).order_by(BankEntry.position)
        )
        .scalars()
        .all()
    )


def entry_counts(session: Session, bank_ids: Iterable[int]) -> dict[int, int]:
    ids = sorted(set(bank_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(BankEntry.bank_id, func.count())
        .where(BankEntry.bank_id.in_(ids))
        .group_by(BankEntry.bank_id)
    ).all()
    return {bank_id: count for bank_id, count in rows}


def transition(
    session: Session,
    *,
    bank_id: int,
    from_status: str,
    to_status: str,
    content_hash: str | None = None,
    frozen_at: datetime | None = None,
    retired_at: datetime | None = None,
) -> bool:
    """Compare-and-set the status; False when the bank was not in `from_status` any more."""
    values: dict[str, object] = {"status": to_status}
    if content_hash is not None:
        values["content_hash"] = content_hash
    if frozen_at is not None:
        values["frozen_at"] = frozen_at
    if retired_at is not None:
        values["retired_at"] = retired_at
    result = session.execute(
        update(Bank)
        .where(Bank.id == bank_id, Bank.status == from_status)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return result.rowcount == 1


def list_banks(
    session: Session,
    *,
    status: str | None,
    round: int | None,
    parent_bank_id: int | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[Bank], int]:
    filters = []
    if status is not None:
        filters.append(Bank.status == status)
    if round is not None:
        filters.append(Bank.round == round)
    if parent_bank_id is not None:
        filters.append(Bank.parent_bank_id == parent_bank_id)
    total = session.execute(select(func.count()).select_from(Bank).where(*filters)).scalar_one()
    rows = (
        session.execute(select(Bank).where(*filters).order_by(Bank.id).limit(limit).offset(offset))
        .scalars()
        .all()
    )
    return rows, total
