"""Every FastAPI dependency of the registry, as `Annotated` aliases routes can use directly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import cache
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from services.registry.concurrency import request_claim
from services.registry.pagination import PageParams, page_params
from services.registry.settings import RegistrySettings
from services.registry.unit_of_work import WriteUnit
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import Principal, authenticated, check_role

# Dependencies that only read app state are `async def`: a plain `def` would cost a thread-pool
# hop per request, which on the frozen-bank hot path is most of the time spent.


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A read-only session for the request, used through `threads.run_read`; writes go through
    `unit_of_work.WriteUnit`.

    Reads never commit: `run_read` closes the session (rolling back) on its own thread, also
    when the request gave up on it at its deadline. So nothing is left to do here that could
    wait on the database; an unused session holds no connection.
    """
    session: Session = request.app.state.session_factory()
    session.info["request"] = request
    try:
        yield session
    finally:
        if not session.in_transaction():
            session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def get_settings(request: Request) -> RegistrySettings:
    return request.app.state.settings


SettingsDep = Annotated[RegistrySettings, Depends(get_settings)]


# Any valid token (all roles read the registry); 401 without one.
Reader = Annotated[Principal, Depends(authenticated)]


@cache
def require_roles(*roles: Role) -> Callable[..., Principal]:
    """A dependency admitting `roles` (operators always) to a privileged read.

    The allowed roles are published in the OpenAPI operation as `x-roles`; writes use
    `unit_of_work.write_unit`, which checks roles the same way.
    """
    allowed = frozenset(roles) | {Role.operator}

    async def dependency(principal: Reader) -> Principal:
        check_role(principal, allowed)
        return principal

    dependency.roles = sorted(role.value for role in allowed)  # type: ignore[attr-defined]
    return dependency


@cache
def write_unit(*roles: Role) -> Callable[..., WriteUnit]:
    """A dependency admitting `roles` (operators always) to write; it reads the Idempotency-Key.

    Every write endpoint depends on one of these, so every write is role-checked (403) and
    idempotent; the allowed roles are published in the OpenAPI operation as `x-roles`.
    """
    allowed = frozenset(roles) | {Role.operator}

    async def dependency(request: Request, principal: Reader) -> WriteUnit:
        check_role(principal, allowed)
        return WriteUnit(request, principal, await request_claim(request))

    dependency.roles = sorted(role.value for role in allowed)  # type: ignore[attr-defined]
    return dependency


OperatorWrite = Annotated[WriteUnit, Depends(write_unit(Role.operator))]
EvaluatorWrite = Annotated[WriteUnit, Depends(write_unit(Role.evaluator))]
TrainerWrite = Annotated[WriteUnit, Depends(write_unit(Role.trainer))]
AnalystWrite = Annotated[WriteUnit, Depends(write_unit(Role.analyst))]
# Privileged reads (the gold-aware half of failure cards) are for analysts and operators only.
PrivilegedReader = Annotated[Principal, Depends(require_roles(Role.analyst))]

Pagination = Annotated[PageParams, Depends(page_params)]
