"""Concurrency helpers, all in one place, each with the reason it exists.

- `conflict_on_integrity`: two writers racing for one unique value (a chunk version number, an
  alias revision, a gate observation) both pass their checks; the database's unique constraint
  decides, and the loser must hear 409, never 500.
- ETags: a frozen bank's strong ETag is its content hash; an alias's ETag is its revision, and
  a move is a compare-and-set on that revision (`If-Match`), so of N movers holding the same
  ETag exactly one wins and the rest get 412.
- Deadlocks: two writers locking the same rows in opposite orders; Postgres rolls one back.
  The unit of work reruns it (`is_deadlock`), and answers 409 if it keeps losing, never 503.
- Idempotency-Key: a client that retries a write after a lost response must not write twice.
  The key is claimed by inserting a row in the write's own transaction (`unit_of_work.py`), and
  the response is stored in that same transaction, so the write and its record commit or vanish
  together. A concurrent request with the same key blocks on the row's unique index until the
  first one commits, then replays its response.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi import Request, Response
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from services.registry.errors import Conflict, FieldInvalid, RegistryError
from services.registry.idempotency import repository as idempotency_repository
from services.registry.idempotency.models import IdempotencyRecord
from shared.kit.auth import Principal

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")


# Postgres SQLSTATEs of a transaction rolled back for a lost race, not for bad input: a
# deadlock victim, and a serialization failure. Both are safe to rerun from the start.
_RERUNNABLE_SQLSTATES = frozenset({"40P01", "40001"})


def is_deadlock(error: Exception) -> bool:
    """Did the database roll this transaction back to break a deadlock (or a serialization
    conflict)? Such a write is rerun by the server (`unit_of_work`), not answered 503."""
    return getattr(getattr(error, "orig", None), "sqlstate", None) in _RERUNNABLE_SQLSTATES


@contextmanager
def conflict_on_integrity(message: str, session: Session) -> Iterator[None]:
    """Turn a unique-constraint loss inside the block into 409 `message` (savepoint-scoped)."""
    try:
        with session.begin_nested():
            yield
    except IntegrityError as error:
        raise Conflict(message) from error


# ---------------------------------------------------------------- ETags


def quote_etag(value: str) -> str:
    return f'"{value}"'


def etag_matches(header: str | None, etag: str) -> bool:
    """Weak comparison for If-None-Match: does any listed tag (or `*`) match `etag`?"""
    if not header:
        return False
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


def alias_etag(revision: int) -> str:
    return quote_etag(f"r{revision}")


def revisions_from_if_match(header: str) -> set[int] | None:
    """Alias revisions an If-Match header accepts; None means `*` (any). Strong tags only."""
    accepted: set[int] = set()
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return None
        match = re.fullmatch(r'"r(\d{1,9})"', candidate)
        if match:
            accepted.add(int(match.group(1)))
    return accepted


# ---------------------------------------------------------------- Idempotency-Key


@dataclass(frozen=True)
class IdempotencyClaim:
    key: str
    request_hash: str
    method: str
    path: str


class IdempotentReplay(RegistryError):
    """Raised when a key was already used for this request: answer with the stored response."""

    status_code = 200

    def __init__(self, record: IdempotencyRecord) -> None:
        super().__init__("replay")
        # Copied now: the session rolls back (and expires the row) before the handler runs.
        self.stored_status = record.status_code or 200
        self.stored_body = bytes(record.body or b"")
        self.stored_headers = dict(record.headers or {})


def replay_response(_request: Request, error: Exception) -> Response:
    assert isinstance(error, IdempotentReplay)
    headers = {k: v for k, v in error.stored_headers.items() if k.lower() != "content-length"}
    headers[REPLAYED_HEADER] = "true"
    return Response(content=error.stored_body, status_code=error.stored_status, headers=headers)


async def request_claim(request: Request) -> IdempotencyClaim | None:
    """The write's Idempotency-Key and a hash of what it asks (method, path, query, body)."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None or request.method not in WRITE_METHODS:
        return None
    if not _KEY_PATTERN.match(key):
        raise FieldInvalid(("header", IDEMPOTENCY_HEADER), "must be 1-255 visible ASCII characters")
    digest = hashlib.sha256()
    for part in (request.method, request.url.path, request.url.query):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\x00")
    digest.update(await request.body())
    return IdempotencyClaim(key, digest.hexdigest(), request.method, request.url.path)


def claim_idempotency(
    *, session: Session, claim: IdempotencyClaim | None, principal: Principal
) -> IdempotencyClaim | None:
    """Claim the key for `principal` in the write's own transaction, or replay its first answer.

    The claim row is inserted by the write's transaction, so a write that fails rolls its claim
    back with it and the key stays free for the corrected request. A concurrent request with
    the same key waits on the row's unique index until the first commits, then replays.
    Returns the claim to fill with the response, or None when there is no key.
    """
    if claim is None:
        return None
    if idempotency_repository.claim(
        session,
        actor=principal.name,
        key=claim.key,
        method=claim.method,
        path=claim.path[:2000],
        request_hash=claim.request_hash,
    ):
        return claim
    existing = idempotency_repository.get(session, actor=principal.name, key=claim.key)
    if existing is None:  # pragma: no cover - the first request rolled back between statements
        raise Conflict("a request with this Idempotency-Key is in flight; retry")
    if existing.request_hash != claim.request_hash:
        raise FieldInvalid(
            ("header", IDEMPOTENCY_HEADER),
            "Idempotency-Key was already used for a different request",
            "idempotency_key_reused",
        )
    raise IdempotentReplay(existing)
