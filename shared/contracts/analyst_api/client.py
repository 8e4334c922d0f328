"""Typed HTTP client for the analyst service (the slow loop).

    with AnalystClient("http://analyst:8200") as analyst:
        analyst.wait_ready(timeout=60)                            # the demo waits on /readyz
        group = analyst.submit_all_wrong_group(AllWrongGroupSubmit(...))   # trainer, idempotent
        job = analyst.compile_round(CompileRoundCreate(...))     # at round end: 202 + job id
        done = analyst.wait(job.id)                               # polls GET until finished
        result = CompileRoundResult.model_validate(done.result)
        funnel = analyst.funnel(run_id, round)

Every call has a timeout; connection errors, timeouts and 5xx are retried with backoff
(Retry-After honoured). Every POST carries an `Idempotency-Key` (the same on each retry), so a
retried job submission whose first answer was lost returns the same job, never a second one.
Errors are typed: `AnalystError` with `.status_code` and `.detail`; `AnalystUnavailable` when
the service stays unreachable; `JobFailed` from `wait` when a job ends failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from shared.contracts.analyst_api.schemas import (
    AllWrongGroupPublic,
    AllWrongGroupSubmit,
    ColdStartCreate,
    CompileRoundCreate,
    FunnelCounts,
    JobPublic,
    Readiness,
)
from shared.contracts.http_retry import RetryingClient, error_detail, json_body

JOB_ROUTES = {"compile": "/v1/compile-jobs", "cold-start": "/v1/cold-start-jobs"}


class AnalystError(Exception):
    def __init__(self, status_code: int, detail: Any, method: str, path: str) -> None:
        super().__init__(f"{method} {path} -> {status_code}: {detail}")
        self.status_code, self.detail = status_code, detail


class AnalystUnavailable(AnalystError):
    """The service did not answer, or kept answering 5xx, after every retry."""


class JobFailed(AnalystError):
    def __init__(self, job: JobPublic) -> None:
        super().__init__(500, job.error, "JOB", job.id)
        self.job = job


class AnalystClient(RetryingClient):
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

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        ok: tuple[int, ...] = (200, 201, 202),
    ) -> httpx.Response:
        """One call with retries; raises `AnalystError` (or `AnalystUnavailable`) on failure."""
        method = method.upper()
        try:
            response = self.send(
                method, path, json=json, params=params, idempotency_key=idempotency_key
            )
        except httpx.TransportError as error:
            raise AnalystUnavailable(0, repr(error), method, path) from error
        if response.status_code in ok:
            return response
        detail = error_detail(response)
        kind = AnalystUnavailable if response.status_code >= 500 else AnalystError
        raise kind(response.status_code, detail, method, path)

    # ------------------------------------------------------------ health

    def healthz(self) -> bool:
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def readyz(self) -> Readiness:
        """Readiness and its checks; not ready (never an exception) when unreachable."""
        try:
            response = self._http.get("/readyz")
        except httpx.TransportError as error:
            return Readiness(ready=False, checks={"service": repr(error)})
        if response.status_code in (200, 503):
            return Readiness.model_validate(response.json())
        return Readiness(ready=False, checks={"service": f"HTTP {response.status_code}"})

    def wait_ready(self, *, timeout: float = 60.0, poll: float = 0.5) -> Readiness:
        """Poll /readyz until ready; raises TimeoutError with the last checks otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            readiness = self.readyz()
            if readiness.ready:
                return readiness
            if time.monotonic() >= deadline:
                raise TimeoutError(f"analyst not ready after {timeout}s: {readiness.checks}")
            time.sleep(poll)

    # ------------------------------------------------------------ all-wrong groups

    def submit_all_wrong_group(
        self, group: AllWrongGroupSubmit | Mapping[str, Any]
    ) -> AllWrongGroupPublic:
        """Record an all-wrong group; resubmitting the same group returns the stored one."""
        response = self.request("POST", "/v1/all-wrong-groups", json=json_body(group))
        return AllWrongGroupPublic.model_validate(response.json())

    def get_group(self, group_id: str) -> AllWrongGroupPublic:
        response = self.request("GET", f"/v1/all-wrong-groups/{group_id}")
        return AllWrongGroupPublic.model_validate(response.json())

    def list_groups(
        self,
        *,
        run_id: str | None = None,
        round: int | None = None,
        status: str | None = None,
        page_size: int = 500,
    ) -> list[AllWrongGroupPublic]:
        """Every matching group, read a page at a time (the service pages its listings)."""
        groups: list[AllWrongGroupPublic] = []
        while True:
            params = {"run_id": run_id, "round": round, "status": status,
                      "limit": page_size, "offset": len(groups)}  # fmt: skip
            page = self.request("GET", "/v1/all-wrong-groups", params=params).json()
            groups += [AllWrongGroupPublic.model_validate(item) for item in page]
            if len(page) < page_size:
                return groups

    # ------------------------------------------------------------ jobs

    def compile_round(
        self, body: CompileRoundCreate | Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> JobPublic:
        """Start a round's retries, analysis and compilation; returns the queued job."""
        return self._submit("compile", body, idempotency_key)

    def cold_start(
        self, body: ColdStartCreate | Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> JobPublic:
        """Start the Trace2Skill cold start; returns the queued job."""
        return self._submit("cold-start", body, idempotency_key)

    def _submit(self, kind: str, body: Any, idempotency_key: str | None) -> JobPublic:
        response = self.request(
            "POST", JOB_ROUTES[kind], json=json_body(body), idempotency_key=idempotency_key
        )
        return JobPublic.model_validate(response.json())

    def get_job(self, job_id: str) -> JobPublic:
        return JobPublic.model_validate(self.request("GET", f"/v1/jobs/{job_id}").json())

    def wait(
        self,
        job_id: str,
        *,
        timeout: float = 3600.0,
        poll: float = 1.0,
        progress: Callable[[JobPublic], object] | None = None,
    ) -> JobPublic:
        """Poll a job until it ends; raises `JobFailed` if it failed, TimeoutError if slow.
        `progress` sees every poll."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if progress is not None:
                progress(job)
            if job.status == "succeeded":
                return job
            if job.status == "failed":
                raise JobFailed(job)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status} after {timeout}s")
            time.sleep(poll)

    # ------------------------------------------------------------ funnel

    def funnel(self, run_id: str, round: int) -> FunnelCounts:
        response = self.request("GET", "/v1/funnel", params={"run_id": run_id, "round": round})
        return FunnelCounts.model_validate(response.json())
