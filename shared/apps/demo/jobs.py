"""Polling the services' async jobs (evaluator and analyst share the job document shape)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


class JobFailed(RuntimeError):
    """A job ended in `failed`; the message carries the service's error."""


def evaluator_submit(url: str, route: str, body: dict[str, Any], *, token: str | None = None):
    """POST a job to the evaluator (`/v1/eval-jobs`, ...); returns the job document."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.post(f"{url}{route}", json=body, headers=headers, timeout=60)
    if response.status_code >= 400:
        raise JobFailed(f"evaluator refused {route}: {response.status_code} {response.text[:500]}")
    return response.json()


def evaluator_job(url: str, route: str, job_id: str, *, token: str | None = None):
    """The job document, or None when the evaluator no longer knows the job."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url}{route}/{job_id}", headers=headers, timeout=30)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


def wait_for(
    poll: Callable[[], dict[str, Any]],
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    interval: float = 1.0,
    timeout: float = 24 * 3600.0,
) -> dict[str, Any]:
    """Poll a job until it succeeds (returned) or fails (`JobFailed`)."""
    deadline = time.monotonic() + timeout
    while True:
        job = poll()
        if on_progress is not None:
            on_progress(job)
        if job["status"] == "succeeded":
            return job
        if job["status"] == "failed":
            raise JobFailed(f"job {job['id']} failed: {job.get('error')}")
        if time.monotonic() > deadline:
            raise JobFailed(f"job {job['id']} still {job['status']} after {timeout:.0f}s")
        time.sleep(interval)
