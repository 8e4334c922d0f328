"""HTTP calls with retries, as the project's service clients (registry, analyst) make them.

Connection errors, timeouts and 5xx answers are retried up to `retries` times with exponential
backoff and jitter; a 5xx's Retry-After (in seconds) replaces the backoff, capped at
`backoff_max`. Every write carries an `Idempotency-Key`, set once so each retry repeats it: a
retried write whose first answer was lost is replayed by the service, never applied twice.
Each client turns the final answer into its own typed errors.
"""

from __future__ import annotations

import random
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import httpx
from pydantic import BaseModel

RETRY_STATUSES = frozenset({500, 502, 503, 504})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})


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


class RetryingClient:
    """What the service clients share: an `httpx.Client` (base URL, bearer token, timeout),
    `send` with retries and idempotency keys, and closing (also as a context manager)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        timeout: float,
        retries: int,
        backoff: float,
        backoff_max: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self.retries, self.backoff, self.backoff_max = retries, backoff, backoff_max
        self.stats: Counter[str] = Counter()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """The final answer of `send_with_retries`; query parameters that are None are left out;
        `timeout` (seconds) replaces the client's for this call (a slow route's own)."""
        method = method.upper()
        sent = dict(headers or {})
        if method in WRITE_METHODS:
            sent["Idempotency-Key"] = idempotency_key or uuid.uuid4().hex
        # httpx reads timeout=None as "no timeout": leave it out to keep the client's
        slow = {"timeout": timeout} if timeout is not None else {}
        return send_with_retries(
            self._http, method, path,
            retries=self.retries, backoff=self.backoff, backoff_max=self.backoff_max,
            stats=self.stats, json=json, headers=sent,
            params={key: value for key, value in (params or {}).items() if value is not None},
            **slow,
        )  # fmt: skip


def wait_until_ready(
    url: str,
    process: subprocess.Popen,
    *,
    path: str = "/healthz",
    timeout: float = 60.0,
    poll: float = 0.2,
    log: Path | None = None,
) -> None:
    """Poll `url + path` until it answers 200; RuntimeError (with the log's tail) when the
    process exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            state = "exited" if process.returncode is not None else f"not ready after {timeout}s"
            tail = log.read_text()[-3000:] if log is not None else ""
            raise RuntimeError(f"{' '.join(process.args)} {state}:\n{tail}")
        time.sleep(poll)


def json_body(value: BaseModel | Mapping[str, Any]) -> Any:
    """A request body as JSON-ready data: a contract model dumped, a mapping copied."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value)
