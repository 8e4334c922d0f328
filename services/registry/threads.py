"""Blocking database work off the event loop, with a deadline that answers 503."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from fastapi import Request

from services.registry.errors import ServiceUnavailable

T = TypeVar("T")


async def run_blocking(request: Request, func: Callable[..., T], *args: object) -> T:
    """`func(*args)` in the thread pool; 503 if it outlives the request deadline.

    The deadline is the client's protection against a database that stops answering without
    closing its sockets (a frozen host): server-side timeouts cannot fire then. The abandoned
    thread finishes or fails on its own; a write it commits late is what Idempotency-Key
    retries are for.
    """
    with anyio.move_on_after(request.app.state.settings.request_timeout_s):
        return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=True)
    raise ServiceUnavailable("the database did not answer in time; retry shortly")
