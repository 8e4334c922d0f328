"""Bearer tokens to principals, one scheme for every IntraSkill service (registry, evaluator,
analyst).

A service's settings list grants, never tokens: `{"name", "role", "token_sha256"}` with an
optional `expires_at` and `revoked` (`intraskill registry token` mints a token and prints its
grant). Each request's `Authorization: Bearer <token>` is hashed and looked up; no or an unknown
token is a 401, a role the route does not admit a 403, both as `{"detail": "..."}` JSON. Which
roles a route admits is the service's business (the registry admits operators to every write;
the evaluator and analyst name each route's roles), published in OpenAPI as `x-roles`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AwareDatetime, BaseModel, Field

from shared.contracts.registry_api.schemas import Name, Role


def hash_token(token: str) -> str:
    """sha256 hex of a bearer token: settings and memory hold only this, never the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenGrant(BaseModel):
    """One bearer token's identity: who (`name`), what it may do (`role`), its sha256, and
    when it stops working (`expires_at`, UTC; none: never) or that it was withdrawn (`revoked`).
    """

    name: Name
    role: Role
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    expires_at: AwareDatetime | None = None
    revoked: bool = False


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role


class AuthRefused(Exception):
    """A request the token scheme refuses; answered as `{"detail": ...}` with `status_code`."""

    status_code = 401

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Unauthorized(AuthRefused):
    """No token, a malformed header, an unknown, revoked or expired token."""

    status_code = 401


class Forbidden(AuthRefused):
    """A valid token whose role the route does not admit."""

    status_code = 403


def auth_refused_response(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, AuthRefused)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, Unauthorized) else None
    return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=headers)


def install_auth_errors(app: FastAPI) -> None:
    """Answer `AuthRefused` (401 with WWW-Authenticate, 403) as JSON."""
    app.add_exception_handler(AuthRefused, auth_refused_response)


class TokenTable:
    """sha256(token) -> principal; built once from settings at app start.

    A revoked grant is refused, and so is an expired one (checked on every request, so a
    token stops working at its `expires_at` without a restart). A token listed more than once
    is refused if any of its grants is revoked: revoking must not depend on list order.
    """

    def __init__(self, grants: Iterable[TokenGrant]) -> None:
        grants = list(grants)
        revoked = {grant.token_sha256 for grant in grants if grant.revoked}
        self._by_hash = {
            grant.token_sha256: (Principal(grant.name, grant.role), grant.expires_at)
            for grant in grants
            if grant.token_sha256 not in revoked
        }

    def __len__(self) -> int:
        return len(self._by_hash)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal for an `Authorization: Bearer <token>` header, else 401."""
        if not authorization:
            raise Unauthorized("missing bearer token")
        scheme, _, token = authorization.partition(" ")
        # HTTP's optional whitespace is space and tab only; str.strip() would also drop
        # U+00A0, U+0085 and other Unicode spaces, accepting a token as something else.
        token = token.strip(" \t")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("expected 'Authorization: Bearer <token>'")
        found = self._by_hash.get(hash_token(token))
        if found is None:
            raise Unauthorized("unknown bearer token")  # a revoked one says no more
        principal, expires_at = found
        if expires_at is not None and datetime.now(UTC) >= expires_at:
            raise Unauthorized("bearer token expired; ask an operator for a new one")
        return principal


def check_role(principal: Principal, allowed: frozenset[Role]) -> None:
    """403 unless `principal` holds one of the `allowed` roles."""
    if principal.role not in allowed:
        raise Forbidden(
            f"role {principal.role.value!r} may not do this; needs one of "
            + ", ".join(sorted(role.value for role in allowed))
        )


_bearer = HTTPBearer(auto_error=False, description="a bearer token (see docs/deploy.md)")


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The principal of the request's token (`app.state.tokens`), any role; 401 without one.
    Async: no thread-pool hop per request. The header is read as sent: `credentials` (which
    documents the scheme in OpenAPI) comes through `str.strip`, which would accept a token
    wrapped in U+00A0 or U+0085."""
    del credentials
    return request.app.state.tokens.authenticate(request.headers.get("authorization"))


def require_roles(*roles: Role) -> Callable[..., Principal]:
    """A dependency admitting exactly `roles` (401 without a valid token, 403 for another
    role); `publish_roles` puts them in the operation's OpenAPI entry as `x-roles`."""
    allowed = frozenset(roles)

    async def dependency(
        principal: Annotated[Principal, Depends(authenticated)],
    ) -> Principal:
        check_role(principal, allowed)
        return principal

    dependency.roles = sorted(role.value for role in allowed)  # type: ignore[attr-defined]
    return dependency


def _roles_of(dependant: Dependant) -> list[str] | None:
    for dependency in dependant.dependencies:
        roles = getattr(dependency.call, "roles", None)
        if roles is not None:
            return roles
        nested = _roles_of(dependency)
        if nested is not None:
            return nested
    return None


def publish_roles(routes: Iterable[object]) -> None:
    """Put each role-gated operation's allowed roles in its OpenAPI entry as `x-roles`."""
    for route in routes:
        if isinstance(route, APIRoute):
            roles = _roles_of(route.dependant)
            if roles is not None:
                route.openapi_extra = {**(route.openapi_extra or {}), "x-roles": roles}
