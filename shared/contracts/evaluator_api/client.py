"""Typed HTTP client for the evaluator service (gate, Gate A and evaluation jobs).

    with EvaluatorClient("http://evaluator:8100", token=token) as evaluator:
        job = evaluator.submit("gate", GateJobCreate(...))          # 202 + the queued job
        done = evaluator.wait_for_job("gate", job.id, progress=show)  # polls GET until it ends
        known = evaluator.find_job("eval", job_id)                   # None: the evaluator
                                                                      # no longer knows it

Every call has a timeout; connection errors, timeouts and 5xx are retried with backoff
(Retry-After honoured) by `shared/contracts/http_retry.py`. Every POST carries an `Idempotency-Key`
(the same on each retry), so a submission whose first answer was lost returns the same job,
never a second one. Errors are typed: `EvaluatorError` with `.status_code`, `.detail` and
`.error_types` (the `type`s of a 422's detail items); `EvaluatorUnavailable` when the service
stays unreachable; `JobFailed` (with `.job`) from `wait_for_job` when a job ends failed. A
message quotes at most `QUOTE_CHARS` of what the service said.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from shared.contracts.evaluator_api.schemas import JobPublic
from shared.contracts.http_retry import RetryingClient, error_detail, json_body

JobKind = Literal["gate", "gate-a", "eval"]
JOB_ROUTES: dict[str, str] = {
    "gate": "/v1/gate-jobs",
    "gate-a": "/v1/gate-a-jobs",
    "eval": "/v1/eval-jobs",
}
QUOTE_CHARS = 300  # an error message names the problem; the whole body stays with the caller
# Planning a gate loads the world and draws its design before the 202: minutes on a big one.
SUBMIT_TIMEOUT_S = 900.0


def quote(detail: Any) -> str:
    text = str(detail)
    return text if len(text) <= QUOTE_CHARS else f"{text[:QUOTE_CHARS]}... ({len(text)} chars)"


class EvaluatorError(Exception):
    def __init__(self, status_code: int, detail: Any, method: str, path: str) -> None:
        super().__init__(f"{method} {path} -> {status_code}: {quote(detail)}")
        self.status_code, self.detail = status_code, detail

    @property
    def error_types(self) -> frozenset[str]:
        """The `type` of each item of a 422's detail list (empty for any other detail)."""
        if not isinstance(self.detail, list):
            return frozenset()
        return frozenset(
            item["type"] for item in self.detail if isinstance(item, dict) and "type" in item
        )


class EvaluatorUnavailable(EvaluatorError):
    """The service did not answer, or kept answering 5xx, after every retry."""


class JobFailed(EvaluatorError):
    """A job ended `failed`; `.job` is its document, the message carries its error."""

    def __init__(self, job: JobPublic) -> None:
        super().__init__(500, job.error, "JOB", job.id)
        self.job = job


class EvaluatorClient(RetryingClient):
    """Synchronous client; one per thread."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.2,
        backoff_max: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token=token, timeout=timeout, retries=retries, backoff=backoff,
            backoff_max=backoff_max, transport=transport,
        )  # fmt: skip
        self.base_url = base_url.rstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        ok: tuple[int, ...] = (200, 201, 202),
    ) -> httpx.Response:
        """One call with retries; raises `EvaluatorError` (or `EvaluatorUnavailable`)."""
        method = method.upper()
        try:
            response = self.send(
                method, path, json=json, idempotency_key=idempotency_key, timeout=timeout
            )
        except httpx.TransportError as error:
            raise EvaluatorUnavailable(
                0, f"{self.base_url} unreachable ({error!r})", method, path
            ) from error
        if response.status_code in ok:
            return response
        kind = EvaluatorUnavailable if response.status_code >= 500 else EvaluatorError
        raise kind(response.status_code, error_detail(response), method, path)

    # ------------------------------------------------------------ jobs

    def submit(
        self,
        kind: JobKind,
        body: BaseModel | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> JobPublic:
        """Queue a job (`GateJobCreate`, `GateAJobCreate`, `EvalJobCreate`); the queued job."""
        response = self.request(
            "POST", JOB_ROUTES[kind], json=json_body(body), idempotency_key=idempotency_key,
            timeout=SUBMIT_TIMEOUT_S,
        )  # fmt: skip
        return JobPublic.model_validate(response.json())

    def get_job(self, kind: JobKind, job_id: str) -> JobPublic:
        response = self.request("GET", f"{JOB_ROUTES[kind]}/{job_id}")
        return JobPublic.model_validate(response.json())

    def find_job(self, kind: JobKind, job_id: str) -> JobPublic | None:
        """The job, or None when this evaluator does not know it (another jobs folder)."""
        try:
            return self.get_job(kind, job_id)
        except EvaluatorError as error:
            if error.status_code == 404:
                return None
            raise

    def list_jobs(self, kind: JobKind) -> list[JobPublic]:
        response = self.request("GET", JOB_ROUTES[kind])
        return [JobPublic.model_validate(job) for job in response.json()]

    def find_gate(self, *, round_index: int, checkpoint_id: str) -> JobPublic | None:
        """The newest gate job of this round and checkpoint that has not failed, if any: a
        job submitted just before a crash (or whose answer was lost) is found, not repeated."""
        mine = [
            job
            for job in self.list_jobs("gate")
            if job.request.get("round") == round_index
            and job.request.get("checkpoint_id") == checkpoint_id
            and job.status != "failed"
        ]
        return max(mine, key=lambda job: job.created_at) if mine else None

    def wait_for_job(
        self,
        kind: JobKind,
        job_id: str,
        *,
        poll: float = 1.0,
        timeout: float = 3600.0,
        progress: Callable[[JobPublic], object] | None = None,
    ) -> JobPublic:
        """Poll a job until it ends: the succeeded job; `JobFailed` if it failed, TimeoutError
        if it is still queued or running after `timeout` seconds. `progress` sees every poll."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(kind, job_id)
            if progress is not None:
                progress(job)
            if job.status == "succeeded":
                return job
            if job.status == "failed":
                raise JobFailed(job)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{kind} job {job_id} still {job.status} after {timeout:.0f}s")
            time.sleep(poll)
