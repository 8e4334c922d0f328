"""Every FastAPI dependency of the registry, as `Annotated` aliases routes can use directly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import cache
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from services.registry.auth import Principal
from services.registry.concurrency import claim_idempotency
from services.registry.errors import Forbidden
from services.registry.pagination import PageParams, page_params
from services.registry.settings import RegistrySettings
from shared.registry_api.schemas import Role

# Dependencies that only read app state are `async def`: a plain `def` would cost a thread-pool
# hop per request, which on the frozen-bank hot path is most of the time spent.
_bearer = HTTPBearer(auto_error=False, description="a registry token (see docs/registry.md)")


def _finish(session: Session, *, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's session: the one place that commits (on success) or rolls back (on error).

    Function-scoped (see `SessionDep`), so the commit happens before the response is sent: a
    client that reads right after a write sees it, and a failing commit is still an error answer.
    Routes run their service call in one thread-pool hop and this dependency commits in one
    more; a session that never touched the database is closed without a hop.
    """
    session: Session = request.app.state.session_factory()
    request.state.session = session
    try:
        yield session
    except BaseException:
        if session.in_transaction():
            await run_in_threadpool(_finish, session, commit=False)
        else:
            session.close()
        raise
    if session.in_transaction():
        await run_in_threadpool(_finish, session, commit=True)
    else:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def get_settings(request: Request) -> RegistrySettings:
    return request.app.state.settings


SettingsDep = Annotated[RegistrySettings, Depends(get_settings)]


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Any valid token (all roles read); 401 without one. Async: no thread hop on reads."""
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    return request.app.state.tokens.authenticate(header)


Reader = Annotated[Principal, Depends(authenticated)]


@cache
def require_roles(*roles: Role) -> Callable[..., Principal]:
    """A dependency admitting `roles` (operators always) that also claims the Idempotency-Key.

    Every write endpoint depends on one of these, so every write is role-checked (403) and
    idempotent; the allowed roles are published in the OpenAPI operation as `x-roles`.
    """
    allowed = frozenset(roles) | {Role.operator}

    async def dependency(request: Request, principal: Reader, session: SessionDep) -> Principal:
        if principal.role not in allowed:
            raise Forbidden(
                f"role {principal.role.value!r} may not do this; needs one of "
                + ", ".join(sorted(role.value for role in allowed))
            )
        if getattr(request.state, "idempotency", None) is not None:
            await run_in_threadpool(
                claim_idempotency, request=request, session=session, principal=principal
            )
        return principal

    dependency.roles = sorted(role.value for role in allowed)  # type: ignore[attr-defined]
    return dependency


Operator = Annotated[Principal, Depends(require_roles(Role.operator))]
Evaluator = Annotated[Principal, Depends(require_roles(Role.evaluator))]
Trainer = Annotated[Principal, Depends(require_roles(Role.trainer))]
Analyst = Annotated[Principal, Depends(require_roles(Role.analyst))]
# Privileged reads (the gold-aware half of failure cards) are for analysts and operators only.
PrivilegedReader = Annotated[Principal, Depends(require_roles(Role.analyst))]

Pagination = Annotated[PageParams, Depends(page_params)]
