"""Job polling for the analyst's end-to-end tests (the services themselves start through
`tests.live_servers.live_server`; the registry comes from the evaluator tests' fixture)."""

from __future__ import annotations

import time

import httpx


def wait_job(http: httpx.Client, location: str, timeout: float = 1800) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = http.get(location).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"{location} still {job['status']}")
        time.sleep(0.5)
