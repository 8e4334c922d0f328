"""One HTTP call with retries, as the project's service clients (registry, analyst) make it.

Connection errors, timeouts and 5xx answers are retried up to `retries` times with exponential
backoff and jitter; a 5xx's Retry-After (in seconds) replaces the backoff, capped at
`backoff_max`. The caller keeps its own headers (an `Idempotency-Key` set once, so every retry
of a write carries the same key) and turns the final answer into its own typed errors.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import httpx

RETRY_STATUSES = frozenset({500, 502, 503, 504})


def retry_delay(
    attempt: int, response: httpx.Response | None, *, backoff: float, backoff_max: float
) -> float:
    """Seconds to wait before retry `attempt` + 1: Retry-After if the answer names one."""
    retry_after = response.headers.get("retry-after", "") if response is not None else ""
    if retry_after.isdigit():
        return min(backoff_max, float(retry_after))
    return min(backoff_max, backoff * 2**attempt) * random.uniform(0.5, 1.0)


def send_with_retries(
    http: httpx.Client,
    method: str,
    path: str,
    *,
    retries: int,
    backoff: float,
    backoff_max: float,
    stats: Counter[str] | None = None,
    **request: Any,
) -> httpx.Response:
    """The last answer (a 5xx once the retries are spent); the last `httpx.TransportError` is
    raised when the service never answered. `stats` counts `requests` sent and `retries`."""
    counts = stats if stats is not None else Counter()
    for attempt in range(retries + 1):
        counts["requests"] += 1
        try:
            response = http.request(method, path, **request)
        except httpx.TransportError:
            if attempt == retries:
                raise
            response = None
        else:
            if response.status_code not in RETRY_STATUSES or attempt == retries:
                return response
        counts["retries"] += 1
        time.sleep(retry_delay(attempt, response, backoff=backoff, backoff_max=backoff_max))
    raise AssertionError("unreachable: the last attempt returns or raises")


def error_detail(response: httpx.Response) -> Any:
    """A FastAPI error answer's `detail`, or the body's text when it is not JSON."""
    try:
        return response.json().get("detail")
    except ValueError:
        return response.text
