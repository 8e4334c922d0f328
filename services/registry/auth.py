"""Bearer tokens to principals. Tokens live in settings as sha256 only; roles gate every write."""

from __future__ import annotations

from dataclasses import dataclass

from services.registry.errors import Unauthorized
from services.registry.settings import TokenGrant, hash_token
from shared.registry_api.schemas import Role


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role


class TokenTable:
    """sha256(token) -> principal; built once from settings at app start."""

    def __init__(self, grants: list[TokenGrant]) -> None:
        self._by_hash = {grant.token_sha256: Principal(grant.name, grant.role) for grant in grants}

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal for an `Authorization: Bearer <token>` header, else 401."""
        if not authorization:
            raise Unauthorized("missing bearer token")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("expected 'Authorization: Bearer <token>'")
        principal = self._by_hash.get(hash_token(token.strip()))
        if principal is None:
            raise Unauthorized("unknown bearer token")
        return principal
