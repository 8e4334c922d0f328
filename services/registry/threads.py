"""Blocking database work off the event loop, with a deadline that answers 503."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Request
from sqlmodel import Session

from services.registry.errors import ServiceUnavailable

T = TypeVar("T")


async def run_blocking(request: Request, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`func(*args, **kwargs)` in the thread pool; 503 if it outlives the request deadline.

    The deadline is the client's protection against a database that stops answering without
    closing its sockets (a frozen host): server-side timeouts cannot fire then. The abandoned
    thread finishes or fails on its own; a write it commits late is what Idempotency-Key
    retries are for.
    """
    with anyio.move_on_after(request.app.state.settings.request_timeout_s):
        return await anyio.to_thread.run_sync(
            partial(func, *args, **kwargs), abandon_on_cancel=True
        )
    raise ServiceUnavailable("the database did not answer in time; retry shortly")


async def run_read(func: Callable[..., T], /, *, session: Session, **kwargs: Any) -> T:
    """`func(session=session, **kwargs)` for a read route, under the request deadline (503).

    The session is closed on the same thread once `func` returns, so a read abandoned at the
    deadline (a frozen database) keeps its session to itself and releases it when it ends;
    nothing waits for it, neither the answer nor the thread that would otherwise close it.
    """

    def read() -> T:
        try:
            return func(session=session, **kwargs)
        finally:
            session.close()

    return await run_blocking(session.info["request"], read)
