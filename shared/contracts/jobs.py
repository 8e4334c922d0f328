"""The job document of the services' async jobs (evaluator, analyst): what every job route
returns (POST -> 202, GET polls). The job store that keeps them is `shared.kit.service_jobs`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

JobStatus = Literal["queued", "running", "succeeded", "failed"]


class JobPublic(BaseModel):
    """The job document every job route returns (POST -> 202, GET polls)."""

    id: str
    kind: str
    status: JobStatus
    request: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None
    progress: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    gate_run_id: int | None = None
