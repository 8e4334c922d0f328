"""Async jobs for the services (evaluator, analyst): `submit` returns at once with an id, the
work runs on a worker thread, and routes answer POST -> 202 + job id, GET polls.

A job's state is kept in memory and mirrored to `<root>/<id>/job.json` after every change, so
a job's outcome survives the process; jobs that were queued or running when the process
stopped are reported as failed ("interrupted") on the next start, never silently lost. A
submission that carries an idempotency key already seen for its kind returns the job it made
the first time, unless that job was interrupted: its work never finished, so the retry runs it
again as a new job (a client resuming after a restart must not inherit the restart's failure).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

JobStatus = Literal["queued", "running", "succeeded", "failed"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Job:
    id: str
    kind: str
    request: dict[str, Any]
    status: JobStatus = "queued"
    created_at: str = field(default_factory=now)
    started_at: str | None = None
    finished_at: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = None
    gate_run_id: int | None = None  # the registry gate run the job opened (evaluator gates)
    idempotency_key: str | None = None

    def public(self) -> dict[str, Any]:
        """The job as routes show it: the idempotency key stays with the service."""
        record = asdict(self)
        record.pop("idempotency_key")
        return record


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


class JobContext:
    """What a running job sees: its folder and a progress reporter."""

    def __init__(self, store: JobStore, job: Job) -> None:
        self._store, self.job = store, job
        self.folder = store.folder(job.id)

    def progress(self, stage: str, done: int, total: int) -> None:
        self._store.update(self.job.id, progress={"stage": stage, "done": done, "total": total})

    def opened_gate_run(self, run_id: int) -> None:
        """Write down the registry gate run the job opened, so whoever finds the job gone
        (the next start, the reaper) can close the run."""
        self._store.update(self.job.id, gate_run_id=run_id)


class LocalContext:
    """A job context for work run in this process (a CLI): a folder, progress on stderr."""

    def __init__(self, folder: Path, *, every: int = 50) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.every = every

    def progress(self, stage: str, done: int, total: int) -> None:
        if done == total or done % self.every == 0:
            print(f"{stage}: {done}/{total}", file=sys.stderr, flush=True)

    def opened_gate_run(self, run_id: int) -> None:
        print(f"gate run {run_id} opened", file=sys.stderr, flush=True)


Work = Callable[[JobContext], dict[str, Any]]


def _interrupted(job: Job) -> bool:
    return job.status == "failed" and job.error == "interrupted"


class JobStore:
    def __init__(
        self, root: Path, *, max_workers: int = 1, name: str = "service", metrics=None
    ) -> None:
        """`name` prefixes the worker threads' names (which service's jobs they run);
        `metrics` (a `shared.observability.ServiceMetrics`) counts and times finished jobs."""
        self.metrics = metrics
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{name}-job")
        self._load()

    def folder(self, job_id: str) -> Path:
        path = self.root / job_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _load(self) -> None:
        for path in sorted(self.root.glob("*/job.json")):
            try:
                job = Job(**json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, TypeError):
                continue
            if job.status in ("queued", "running"):
                job.status, job.error, job.finished_at = "failed", "interrupted", now()
                self._write(job)
            self._jobs[job.id] = job

    def _write(self, job: Job) -> None:
        path = self.folder(job.id) / "job.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(job), indent=1), encoding="utf-8")
        temporary.replace(path)

    def update(self, job_id: str, **changes: Any) -> Job:
        with self._lock:
            job = self._jobs[job_id]
            for key, value in changes.items():
                setattr(job, key, value)
            self._write(job)
            return job

    def submit(
        self, kind: str, request: dict[str, Any], work: Work, *, key: str | None = None
    ) -> Job:
        """A new job running `work`; a known idempotency `key` returns the first job instead."""
        with self._lock:
            if key is not None:
                for job in self._jobs.values():
                    if job.idempotency_key == key and job.kind == kind and not _interrupted(job):
                        return job
            job = Job(id=f"{kind}-{uuid.uuid4().hex[:12]}", kind=kind, request=request)
            job.idempotency_key = key
            self._jobs[job.id] = job
            self._write(job)
        self._pool.submit(self._run, job, work)
        return job

    def _run(self, job: Job, work: Work) -> None:
        self.update(job.id, status="running", started_at=now())
        started = time.monotonic()
        try:
            result = work(JobContext(self, job))
        except Exception as error:  # a job's failure is its result; the service goes on
            detail = f"{type(error).__name__}: {error}"
            (self.folder(job.id) / "traceback.txt").write_text(traceback.format_exc())
            self.update(job.id, status="failed", error=detail, finished_at=now())
            self._count(job, "failed", started)
            return
        self.update(job.id, status="succeeded", result=result, finished_at=now())
        self._count(job, "succeeded", started)

    def _count(self, job: Job, outcome: str, started: float) -> None:
        if self.metrics is not None:
            self.metrics.job_done(job.kind, outcome, time.monotonic() - started)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list(self, kind: str | None = None) -> list[Job]:
        with self._lock:
            return [job for job in self._jobs.values() if kind is None or job.kind == kind]

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
