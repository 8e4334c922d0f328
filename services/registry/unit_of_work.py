"""Every write is one unit of work: one thread-pool call opens, works, records and commits.

Why one call: a write holds row locks from its first statement to its commit. If the commit ran
in a later thread-pool hop (a dependency teardown, say), then under contention every pool thread
can sit blocked on the row the uncommitted winner holds while the winner waits for a free thread
to commit: the server hangs for good. Here the thread that took the locks is the thread that
releases them, so a contended write only ever waits for another write that can finish.

The unit also claims the request's Idempotency-Key and stores the response bytes in the same
transaction as the write, so the two commit or vanish together (a failed write leaves no claim).
On SQLite the registry takes writers one at a time (see `db.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from services.registry.concurrency import IdempotencyClaim, claim_idempotency, is_deadlock
from services.registry.errors import Conflict
from services.registry.idempotency import repository as idempotency_repository
from services.registry.threads import run_blocking
from shared.auth import Principal

_STORED_HEADERS = ("content-type", "location", "etag", "cache-control")
# A deadlock (or serialization failure) rolls the whole unit back: nothing was written, so it
# is safe to run again. Postgres picks one victim per deadlock; the rerun then usually waits
# behind the winner and sees its commit.
DEADLOCK_ATTEMPTS = 4
DEADLOCK_BACKOFF_S = 0.02


@dataclass(frozen=True)
class Written:
    """What a write answers: the body model, its status and extra headers."""

    body: BaseModel
    status_code: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


def _render(written: Written) -> Response:
    # Rendered here, inside the transaction, so the stored replay is byte-identical to the
    # answer sent.
    return Response(
        content=written.body.model_dump_json(),
        status_code=written.status_code,
        media_type="application/json",
        headers=dict(written.headers),
    )


class WriteUnit:
    """The write a request may make, as `principal`; call it with the work to do."""

    def __init__(self, request: Request, principal: Principal, claim: IdempotencyClaim | None):
        self.request = request
        self.principal = principal
        self.claim = claim

    async def __call__(
        self,
        work: Callable[[Session], Any],
        *,
        status_code: int = 200,
        headers: Callable[[Any], Mapping[str, str]] | None = None,
    ) -> Response:
        """Run `work(session)` and commit in one thread; its result becomes the response body.

        `work` returns a model (answered with `status_code` and `headers(model)`) or a `Written`.
        """

        def answer(result: Any) -> Written:
            if isinstance(result, Written):
                return result
            return Written(result, status_code, headers(result) if headers else {})

        return await run_blocking(self.request, self._run, work, answer)

    def _run(self, work: Callable[[Session], Any], answer: Callable[[Any], Written]) -> Response:
        """`_attempt`, again after a deadlock; 409 (never 503) if it keeps deadlocking."""
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                return self._attempt(work, answer)
            except OperationalError as error:
                if not is_deadlock(error):
                    raise
                if attempt == DEADLOCK_ATTEMPTS:
                    raise Conflict(
                        "the write kept deadlocking with concurrent writes; retry it"
                    ) from error
                time.sleep(DEADLOCK_BACKOFF_S * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(
        self, work: Callable[[Session], Any], answer: Callable[[Any], Written]
    ) -> Response:
        state = self.request.app.state
        with state.write_session_factory() as session, session.begin():
            claimed = claim_idempotency(session=session, claim=self.claim, principal=self.principal)
            response = _render(answer(work(session)))
            if claimed is not None:
                stored = {k: v for k, v in response.headers.items() if k in _STORED_HEADERS}
                idempotency_repository.fill_response(
                    session,
                    actor=self.principal.name,
                    key=claimed.key,
                    status_code=response.status_code,
                    body=bytes(response.body),
                    headers=stored,
                )
        return response
