"""Aliases: create, move (compare-and-set on If-Match), rollback, history. `production` and the
other protected names move only by an operator."""

from __future__ import annotations

from sqlmodel import Session

from services.registry.aliases import repository
from services.registry.aliases.models import Alias, AliasEvent
from services.registry.audit import service as audit
from services.registry.banks import repository as banks_repository
from services.registry.concurrency import alias_etag, conflict_on_integrity, revisions_from_if_match
from services.registry.errors import (
    Conflict,
    FieldInvalid,
    Forbidden,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
)
from services.registry.gates import service as gates
from services.registry.models_base import utcnow
from services.registry.pagination import page
from shared.contracts.registry_api.aliases import is_protected
from shared.contracts.registry_api.schemas import (
    AliasAction,
    AliasCreate,
    AliasEventPublic,
    AliasMove,
    AliasPublic,
    AliasRollback,
    BankStatus,
    Page,
    Role,
)
from shared.kit.auth import Principal


def public(alias: Alias) -> AliasPublic:
    return AliasPublic(
        name=alias.name,
        bank_id=alias.bank_id,
        revision=alias.revision,
        etag=alias_etag(alias.revision),
        protected=alias.protected,
        updated_by=alias.updated_by,
        updated_at=alias.updated_at,
    )


def require_alias(session: Session, name: str) -> Alias:
    alias = repository.get(session, name)
    if alias is None:
        raise NotFound("alias", name)
    return alias


def _check_target(session: Session, bank_id: int, gate_decision_id: int | None) -> None:
    # Share-locked: a concurrent retire of this bank waits for the alias write, then sees it.
    bank = banks_repository.get_for_share(session, bank_id)
    if bank is None:
        raise FieldInvalid(("body", "bank_id"), f"bank {bank_id} not found")
    if bank.status != BankStatus.frozen:
        raise Conflict(f"bank {bank_id} is {bank.status}; aliases point at frozen banks only")
    if gate_decision_id is not None:
        gates.require_final_decision(session, gate_decision_id, ("body", "gate_decision_id"))


# Characters that read as others in an alias name (Unicode TR39's confusables among the
# characters a name may hold), and the separators a reader's eye skips.
def _check_protection(name: str, principal: Principal, protected_names: list[str]) -> None:
    if is_protected(name, protected_names) and principal.role != Role.operator:
        raise Forbidden(
            f"alias {name!r} is protected (or looks like a protected name): only an operator "
            "creates or moves it"
        )


def _event(
    session: Session,
    *,
    principal: Principal,
    alias: str,
    revision: int,
    action: AliasAction,
    from_bank_id: int | None,
    to_bank_id: int,
    reason: str,
    gate_decision_id: int | None,
) -> None:
    repository.add(
        session,
        AliasEvent(
            alias=alias,
            revision=revision,
            action=action.value,
            from_bank_id=from_bank_id,
            to_bank_id=to_bank_id,
            actor=principal.name,
            role=principal.role.value,
            reason=reason,
            gate_decision_id=gate_decision_id,
        ),
    )


def create_alias(
    *, session: Session, principal: Principal, data: AliasCreate, protected_names: list[str]
) -> AliasPublic:
    """A new alias at revision 1 pointing at a frozen bank."""
    _check_protection(data.name, principal, protected_names)
    if repository.get(session, data.name) is not None:
        raise Conflict(f"alias {data.name!r} exists; move it with PUT and If-Match")
    _check_target(session, data.bank_id, data.gate_decision_id)
    alias = Alias(
        name=data.name,
        bank_id=data.bank_id,
        revision=1,
        protected=is_protected(data.name, protected_names),
        updated_by=principal.name,
    )
    with conflict_on_integrity(f"alias {data.name!r} was created concurrently", session):
        repository.add(session, alias)
    _event(
        session,
        principal=principal,
        alias=alias.name,
        revision=1,
        action=AliasAction.create,
        from_bank_id=None,
        to_bank_id=data.bank_id,
        reason=data.reason,
        gate_decision_id=data.gate_decision_id,
    )
    result = public(alias)
    audit.record(
        session=session,
        principal=principal,
        action="alias.create",
        object_type="alias",
        object_id=alias.name,
        after=result,
    )
    return result


def _move(
    *,
    session: Session,
    principal: Principal,
    name: str,
    bank_id: int,
    reason: str,
    gate_decision_id: int | None,
    accepted: set[int] | None,
    action: AliasAction,
) -> AliasPublic:
    alias = repository.get_for_update(session, name)
    if alias is None:
        raise NotFound("alias", name)
    _check_target(session, bank_id, gate_decision_id)
    if accepted is not None and alias.revision not in accepted:
        raise PreconditionFailed(
            f"alias {name!r} is at {alias_etag(alias.revision)}; re-read it and retry",
            headers={"ETag": alias_etag(alias.revision)},
        )
    before = public(alias)
    # The UPDATE ... WHERE revision = r is the arbiter: of concurrent movers that all read
    # revision r, the first to commit wins; the others re-check the row after it and match 0.
    if not repository.compare_and_set(
        session,
        name=name,
        expected_revision=alias.revision,
        bank_id=bank_id,
        actor=principal.name,
        at=utcnow(),
    ):
        raise PreconditionFailed(f"alias {name!r} moved concurrently; re-read it and retry")
    _event(
        session,
        principal=principal,
        alias=name,
        revision=alias.revision + 1,
        action=action,
        from_bank_id=alias.bank_id,
        to_bank_id=bank_id,
        reason=reason,
        gate_decision_id=gate_decision_id,
    )
    after = public(require_alias(session, name))
    audit.record(
        session=session,
        principal=principal,
        action=f"alias.{action.value}",
        object_type="alias",
        object_id=name,
        before=before,
        after=after,
    )
    return after


def move_alias(
    *,
    session: Session,
    principal: Principal,
    name: str,
    data: AliasMove,
    if_match: str | None,
    protected_names: list[str],
) -> AliasPublic:
    """Point the alias at another frozen bank; If-Match required (428), stale -> 412."""
    _check_protection(name, principal, protected_names)
    if not if_match:
        raise PreconditionRequired("moving an alias needs If-Match with its current ETag")
    return _move(
        session=session,
        principal=principal,
        name=name,
        bank_id=data.bank_id,
        reason=data.reason,
        gate_decision_id=data.gate_decision_id,
        accepted=revisions_from_if_match(if_match),
        action=AliasAction.move,
    )


def rollback_alias(
    *, session: Session, principal: Principal, name: str, data: AliasRollback, if_match: str | None
) -> AliasPublic:
    """Operator: point the alias back at an earlier bank (default: the previous target)."""
    alias = require_alias(session, name)
    target = data.bank_id
    if target is None:
        latest = repository.latest_event(session, name)
        if latest is None or latest.from_bank_id is None:
            raise Conflict(f"alias {name!r} has no earlier bank to roll back to")
        target = latest.from_bank_id
    accepted = None if not if_match else revisions_from_if_match(if_match)
    # A stale If-Match says "someone moved it first" (412) before "it is there already" (409):
    # the caller's view is out of date, whatever the alias points at now.
    if target == alias.bank_id and (accepted is None or alias.revision in accepted):
        raise Conflict(f"alias {name!r} already points at bank {target}")
    return _move(
        session=session,
        principal=principal,
        name=name,
        bank_id=target,
        reason=data.reason,
        gate_decision_id=None,
        accepted=accepted,
        action=AliasAction.rollback,
    )


def get_alias(*, session: Session, name: str) -> AliasPublic:
    """One alias with its ETag."""
    return public(require_alias(session, name))


def list_aliases(
    *, session: Session, bank_id: int | None, limit: int, offset: int
) -> Page[AliasPublic]:
    """Aliases by name, optionally those pointing at one bank."""
    rows, total = repository.list_aliases(session, bank_id=bank_id, limit=limit, offset=offset)
    return page([public(row) for row in rows], total, limit, offset)


def history(*, session: Session, name: str, limit: int, offset: int) -> Page[AliasEventPublic]:
    """The alias's append-only history, oldest first."""
    require_alias(session, name)
    rows, total = repository.list_events(session, name=name, limit=limit, offset=offset)
    return page([AliasEventPublic.model_validate(row) for row in rows], total, limit, offset)


def resolve_outside_request(*, session_factory, name: str) -> AliasPublic:
    """`get_alias` in a read-only session of its own (for async routes)."""
    with session_factory() as session:
        return get_alias(session=session, name=name)
