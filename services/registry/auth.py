"""Bearer tokens to principals. Tokens live in settings as sha256 only; roles gate every write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from services.registry.errors import Unauthorized
from services.registry.settings import TokenGrant, hash_token
from shared.registry_api.schemas import Role


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role


class TokenTable:
    """sha256(token) -> principal; built once from settings at app start.

    A revoked grant is refused, and so is an expired one (checked on every request, so a
    token stops working at its `expires_at` without a restart). A token listed more than once
    is refused if any of its grants is revoked: revoking must not depend on list order.
    """

    def __init__(self, grants: list[TokenGrant]) -> None:
        revoked = {grant.token_sha256 for grant in grants if grant.revoked}
        self._by_hash = {
            grant.token_sha256: (Principal(grant.name, grant.role), grant.expires_at)
            for grant in grants
            if grant.token_sha256 not in revoked
        }

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal for an `Authorization: Bearer <token>` header, else 401."""
        if not authorization:
            raise Unauthorized("missing bearer token")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("expected 'Authorization: Bearer <token>'")
        found = self._by_hash.get(hash_token(token.strip()))
        if found is None:
            raise Unauthorized("unknown bearer token")  # a revoked one says no more
        principal, expires_at = found
        if expires_at is not None and datetime.now(UTC) >= expires_at:
            raise Unauthorized("bearer token expired; ask an operator for a new one")
        return principal
