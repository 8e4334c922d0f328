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

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from fastapi import Request, Response
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from services.registry.audit import service as audit
from services.registry.concurrency import IdempotencyClaim, claim_idempotency, is_deadlock
from services.registry.errors import Conflict, ServiceUnavailable
from services.registry.idempotency import repository as idempotency_repository
from services.registry.threads import run_blocking
from shared.kit.auth import Principal

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
        insert_only: bool = False,
    ) -> Response:
        """Run `work(session)` and commit in one thread; its result becomes the response body.

        `work` returns a model (answered with `status_code` and `headers(model)`) or a `Written`.
        `insert_only`: the work only reads and inserts (it takes no row lock and changes no
        row), so it may share a transaction with concurrent writes like it (`GroupCommit`).
        """

        def answer(result: Any) -> Written:
            if isinstance(result, Written):
                return result
            return Written(result, status_code, headers(result) if headers else {})

        state = self.request.app.state
        if insert_only and self.claim is None:
            return await state.group_commit.submit(self, work, answer)
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
            audit.insert_recorded(session)  # last: audit ids follow commit order
        return response


@dataclass
class _Queued:
    unit: WriteUnit
    work: Callable[[Session], Any]
    answer: Callable[[Any], Written]
    future: asyncio.Future


class GroupCommit:
    """Group commit for insert-only writes (a card POST is the hottest write).

    The writes that arrive while one batch is being written are written together in the next:
    one thread hop, one transaction and one commit (one WAL flush, one fsync) for all of them,
    instead of one each; the cost that dominated a card POST (profiled: docs/registry.md).
    Sharing a transaction is safe for writes that only read and insert: none waits on a lock
    another holds, and each answers from its own rows. If anything in a batch fails, nothing
    of it was committed, and each of its writes is run again alone (`WriteUnit._run`) so that
    a failure answers only its own request. One batch is in flight per process at a time.
    """

    MAX_BATCH = 64

    def __init__(self) -> None:
        self._queued: list[_Queued] = []
        self._draining: asyncio.Task | None = None

    async def submit(
        self, unit: WriteUnit, work: Callable[[Session], Any], answer: Callable[[Any], Written]
    ) -> Response:
        """Queue the write for the next batch and wait for its response (or its error)."""
        loop = asyncio.get_running_loop()
        queued = _Queued(unit, work, answer, loop.create_future())
        self._queued.append(queued)
        if self._draining is None:
            self._draining = loop.create_task(self._drain(unit.request.app.state))
        return await queued.future

    async def _drain(self, state: Any) -> None:
        try:
            while self._queued:
                batch = self._queued[: self.MAX_BATCH]
                del self._queued[: self.MAX_BATCH]
                outcomes: list[Any] = [
                    ServiceUnavailable("the database did not answer in time; retry shortly")
                ] * len(batch)
                with anyio.move_on_after(state.settings.request_timeout_s):
                    outcomes = await anyio.to_thread.run_sync(
                        self._write, state, batch, abandon_on_cancel=True
                    )
                for queued, outcome in zip(batch, outcomes, strict=True):
                    if queued.future.done():  # the client went away
                        continue
                    if isinstance(outcome, BaseException):
                        queued.future.set_exception(outcome)
                    else:
                        queued.future.set_result(outcome)
        finally:
            self._draining = None

    @staticmethod
    def _write(state: Any, batch: list[_Queued]) -> list[Response | BaseException]:
        if len(batch) > 1:
            try:
                with state.write_session_factory() as session, session.begin():
                    responses = [_render(q.answer(q.work(session))) for q in batch]
                    audit.insert_recorded(session)  # last: audit ids follow commit order
                return responses
            except Exception:
                pass
        outcomes: list[Response | BaseException] = []
        for queued in batch:
            try:
                outcomes.append(queued.unit._run(queued.work, queued.answer))
            except Exception as error:
                outcomes.append(error)
        return outcomes
