"""SQL for failure cards, their privileged audits, and candidates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlmodel import Session

from services.registry.cards.models import Candidate, CandidateCitation, CardAudit, FailureCard

# Core statements, built once: a card write is the hottest write, and an ORM flush (identity
# map, unit of work, attribute events) costs several times the statement itself.
# Many cards in one statement, their ids returned in the order of the rows given.
_INSERT_CARDS = insert(FailureCard.__table__).returning(
    FailureCard.__table__.c.id, sort_by_parameter_order=True
)
_INSERT_CARD_AUDIT = insert(CardAudit.__table__)


def get_card(session: Session, card_id: int) -> FailureCard | None:
    return session.get(FailureCard, card_id)


def get_card_audit(session: Session, card_id: int) -> CardAudit | None:
    return session.get(CardAudit, card_id)


def cards_by_id(session: Session, card_ids: Iterable[int]) -> dict[int, FailureCard]:
    ids = sorted(set(card_ids))
    if not ids:
        return {}
    rows = session.execute(select(FailureCard).where(FailureCard.id.in_(ids))).scalars()
    return {row.id: row for row in rows}


def existing_card_ids(session: Session, card_ids: Iterable[int]) -> set[int]:
    return set(cards_by_id(session, card_ids))


def get_candidate(session: Session, candidate_id: int) -> Candidate | None:
    return session.get(Candidate, candidate_id)


def candidate_by_signature(session: Session, signature: str) -> Candidate | None:
    return session.execute(
        select(Candidate).where(Candidate.signature == signature)
    ).scalar_one_or_none()


def citing_candidates(session: Session, card_ids: Iterable[int], *, round: int) -> dict[int, int]:
    """card id -> the candidate of `round` that already cites it, for those that are cited."""
    rows = session.execute(
        select(CandidateCitation.card_id, CandidateCitation.candidate_id).where(
            CandidateCitation.round == round, CandidateCitation.card_id.in_(sorted(set(card_ids)))
        )
    )
    return {card_id: candidate_id for card_id, candidate_id in rows}


def cite(session: Session, card_ids: Iterable[int], *, round: int, candidate_id: int) -> None:
    """Record that `candidate_id` cites `card_ids` in `round` (a card once per round)."""
    session.execute(
        insert(CandidateCitation.__table__),
        [{"card_id": card, "round": round, "candidate_id": candidate_id} for card in card_ids],
    )


def insert_cards(
    session: Session, rows: list[dict[str, Any]], privileged_audits: list[dict[str, Any]]
) -> list[int]:
    """Insert cards (every column but `id`) and their privileged audits, one statement per
    table however many cards; returns the cards' ids in the order of `rows`."""
    connection = session.connection()
    card_ids = list(connection.execute(_INSERT_CARDS, rows).scalars())
    connection.execute(
        _INSERT_CARD_AUDIT,
        [
            {"card_id": card_id, "privileged_audit": audit}
            for card_id, audit in zip(card_ids, privileged_audits, strict=True)
        ],
    )
    return card_ids


def add(session: Session, row: FailureCard | CardAudit | Candidate) -> None:
    session.add(row)
    session.flush()


def list_cards(
    session: Session,
    *,
    round: int | None,
    outcome: str | None,
    eligible: bool | None,
    task_id: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[FailureCard], int]:
    filters = []
    if round is not None:
        filters.append(FailureCard.round == round)
    if outcome is not None:
        filters.append(FailureCard.outcome == outcome)
    if eligible is not None:
        filters.append(FailureCard.eligible == eligible)
    if task_id is not None:
        filters.append(FailureCard.task_id == task_id)
    total = session.execute(
        select(func.count()).select_from(FailureCard).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(FailureCard).where(*filters).order_by(FailureCard.id).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def list_candidates(
    session: Session,
    *,
    round: int | None,
    operation: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[Candidate], int]:
    filters = []
    if round is not None:
        filters.append(Candidate.round == round)
    if operation is not None:
        filters.append(Candidate.operation == operation)
    if status is not None:
        filters.append(Candidate.status == status)
    total = session.execute(
        select(func.count()).select_from(Candidate).where(*filters)
    ).scalar_one()
    rows = (
        session.execute(
            select(Candidate).where(*filters).order_by(Candidate.id).limit(limit).offset(offset)
        )
        .scalars()
        .all()
    )
    return rows, total


def candidates_of_versions(session: Session, version_ids: Iterable[int]) -> list[Candidate]:
    """The candidates stored as these chunk versions, by id."""
    ids = sorted(set(version_ids))
    if not ids:
        return []
    return list(
        session.execute(
            select(Candidate).where(Candidate.chunk_version_id.in_(ids)).order_by(Candidate.id)
        ).scalars()
    )


def settle_candidates(
    session: Session, *, decision_id: int, selected: set[int], rejected: set[int]
) -> int:
    """Settle the still-proposed candidates stored as these versions (selected or rejected by
    `decision_id`); returns how many it settled. A settled candidate is never matched again,
    and on Postgres a concurrent settle of the same row waits, re-reads it and skips it."""
    settled = 0
    for status, version_ids in (("selected", selected), ("rejected", rejected)):
        if version_ids:
            settled += session.execute(
                update(Candidate)
                .where(
                    Candidate.chunk_version_id.in_(sorted(version_ids)),
                    Candidate.status == "proposed",
                )
                .values(status=status, decision_id=decision_id)
                .execution_options(synchronize_session=False)
            ).rowcount
    return settled
