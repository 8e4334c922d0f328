"""The trainer's HTTP client for the evaluator's gate jobs (POST, then poll until finished).

Connection errors, timeouts and 5xx are retried with exponential backoff; when the evaluator
stays unreachable the caller gets `EvaluatorUnavailable`, whose message names the URL.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

RETRY_STATUSES = frozenset({500, 502, 503, 504})


class EvaluatorError(RuntimeError):
    def __init__(
        self, message: str, status_code: int = 0, error_types: frozenset[str] = frozenset()
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_types = error_types  # the `type`s of a 422's detail items


def _error_types(response: httpx.Response) -> frozenset[str]:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return frozenset()
    if not isinstance(detail, list):
        return frozenset()
    return frozenset(item["type"] for item in detail if isinstance(item, dict) and "type" in item)


class EvaluatorUnavailable(EvaluatorError):
    """No answer (or only 5xx) after every retry."""


class EvaluatorClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        retries: int = 6,
        backoff: float = 0.5,
        backoff_max: float = 20.0,
        timeout: float = 30.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self.retries, self.backoff, self.backoff_max = retries, backoff, backoff_max

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        last = ""
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.ConnectError as error:  # nothing reached the server: safe to retry
                last = repr(error)
            except httpx.TransportError as error:
                if method != "GET":  # the job may exist already: the caller looks it up
                    raise EvaluatorError(f"{method} {path}: no answer ({error!r})") from error
                last = repr(error)
            else:
                if response.status_code not in RETRY_STATUSES:
                    if response.status_code >= 400:
                        raise EvaluatorError(
                            f"{method} {path} -> {response.status_code}: {response.text[:2000]}",
                            response.status_code,
                            _error_types(response),
                        )
                    return response.json()
                last = f"HTTP {response.status_code}: {response.text[:500]}"
            if attempt < self.retries:
                time.sleep(
                    min(self.backoff_max, self.backoff * 2**attempt) * random.uniform(0.5, 1)
                )
        raise EvaluatorUnavailable(f"evaluator at {self.base_url} unreachable: {last}")

    def submit_gate(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a gate job; planning can take minutes (the world loads), hence the long wait."""
        return self._request("POST", "/v1/gate-jobs", json=body, timeout=900.0)

    def find_gate(self, *, round_index: int, checkpoint_id: str) -> dict[str, Any] | None:
        """The newest gate job of this round and checkpoint that has not failed, if any: a
        job submitted just before a crash (or whose answer was lost) is found, not repeated."""
        jobs = self._request("GET", "/v1/gate-jobs")
        mine = [
            job
            for job in jobs
            if job["request"].get("round") == round_index
            and job["request"].get("checkpoint_id") == checkpoint_id
            and job["status"] != "failed"
        ]
        return max(mine, key=lambda job: job["created_at"]) if mine else None

    def gate_job(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/gate-jobs/{job_id}")

    def wait(self, job_id: str, *, poll: float, timeout: float, progress=None) -> dict[str, Any]:
        """Poll a gate job until it succeeds or fails; returns the job document."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.gate_job(job_id)
            if progress is not None:
                progress(job)
            if job["status"] in ("succeeded", "failed"):
                return job
            if time.monotonic() > deadline:
                raise EvaluatorError(f"gate job {job_id} still {job['status']} after {timeout}s")
            time.sleep(poll)
