"""Async jobs for the services (evaluator, analyst): `submit` returns at once with an id, the
work runs on a worker thread, and routes answer POST -> 202 + job id, GET polls.

A job's state is kept in memory and mirrored to `<root>/<id>/job.json` after every change, so
a job's outcome survives the process; jobs that were queued or running when the process
stopped are reported as failed ("interrupted") on the next start, never silently lost.

Idempotency: a submission's `Idempotency-Key` is the caller's own (keys of two callers never
meet) and is bound to the request's hash: the same caller, key and body again return the first
job (a replay); the same key with another body is a conflict (409). A job that failed (an
interruption included) releases its key: its work never finished, so the retry runs it again as
a new job (a client resuming after a restart must not inherit the restart's failure).

Queueing: each submitter role has its own lane of at most `max_queued` waiting jobs (past it,
`QueueFull`: a 429 with Retry-After), and the workers take the lanes in turn, so one role's
burst delays another role's job by at most one job per worker.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

# the job document is part of each service's contract; re-exported for the services' routes
from shared.contracts.jobs import JobPublic as JobPublic
from shared.contracts.jobs import JobStatus
from shared.kit.files import write_json_atomic


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
    caller: str | None = None  # the principal whose key it is
    request_hash: str | None = None

    def public(self) -> dict[str, Any]:
        """The job as routes show it: the idempotency key and its binding stay with the service."""
        record = asdict(self)
        for private in ("idempotency_key", "caller", "request_hash"):
            record.pop(private)
        return record


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


class IdempotencyConflict(ValueError):
    """The caller's key already names a job made from another request (answered 409)."""


class QueueFull(RuntimeError):
    """The caller's role has `max_queued` jobs waiting (answered 429 with Retry-After)."""

    def __init__(self, lane: str, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{limit} jobs of role {lane!r} are waiting already; retry later")
        self.retry_after_s = retry_after_s


def request_hash(request: dict[str, Any]) -> str:
    """What an idempotency key is bound to: the request as the service validated it."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class JobStore:
    def __init__(
        self,
        root: Path,
        *,
        max_workers: int = 1,
        max_queued: int = 16,
        retry_after_s: int = 30,
        name: str = "service",
        metrics=None,
    ) -> None:
        """`name` prefixes the worker threads' names (which service's jobs they run);
        `metrics` (a `shared.kit.observability.ServiceMetrics`) counts and times finished jobs;
        `max_queued` jobs may wait per submitter role, `retry_after_s` is what a 429 says."""
        self.metrics = metrics
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_queued, self.retry_after_s = max_queued, retry_after_s
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._waiting = threading.Condition(self._lock)
        self._lanes: dict[str, deque[tuple[Job, Work]]] = {}  # role -> its queued jobs
        self._turn: deque[str] = deque()  # lanes in the order they are served next
        self._stopping = False
        self._load()
        # daemon threads: a stopping service does not wait for a running job (the next start
        # reports it interrupted, and the evaluator closes its gate run)
        self._workers = [
            threading.Thread(target=self._serve, name=f"{name}-job-{n}", daemon=True)
            for n in range(max_workers)
        ]
        for worker in self._workers:
            worker.start()

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
        write_json_atomic(self.folder(job.id) / "job.json", asdict(job))

    def update(self, job_id: str, **changes: Any) -> Job:
        with self._lock:
            job = self._jobs[job_id]
            for key, value in changes.items():
                setattr(job, key, value)
            self._write(job)
            return job

    def submit(
        self,
        kind: str,
        request: dict[str, Any],
        work: Work,
        *,
        key: str | None = None,
        caller: str | None = None,
        lane: str = "default",
    ) -> Job:
        """A new job running `work`, queued in `lane` (the submitter's role). The same
        `caller`'s `key` returns its first job for the same request, unless that job failed;
        IdempotencyConflict for another request; QueueFull when the lane is full."""
        digest = request_hash(request)
        with self._lock:
            if key is not None:
                first = self._keyed(kind, key, caller)
                if first is not None and first.request_hash != digest:
                    raise IdempotencyConflict(
                        "Idempotency-Key was already used for a different request"
                    )
                if first is not None:
                    return first
            queue = self._lanes.setdefault(lane, deque())
            if len(queue) >= self.max_queued:
                raise QueueFull(lane, self.max_queued, self.retry_after_s)
            job = Job(id=f"{kind}-{uuid.uuid4().hex[:12]}", kind=kind, request=request)
            job.idempotency_key, job.caller, job.request_hash = key, caller, digest
            self._jobs[job.id] = job
            self._write(job)
            queue.append((job, work))
            if lane not in self._turn:
                self._turn.append(lane)
            self._waiting.notify()
        return job

    def _keyed(self, kind: str, key: str, caller: str | None) -> Job | None:
        """The standing job the caller's key made (a failed one released the key)."""
        for job in self._jobs.values():
            same = (job.idempotency_key, job.caller, job.kind) == (key, caller, kind)
            if same and job.status != "failed":
                return job
        return None

    def _serve(self) -> None:
        """A worker: the next lane in turn gives its oldest job; that lane goes to the back."""
        while True:
            with self._lock:
                while not self._turn and not self._stopping:
                    self._waiting.wait()
                if self._stopping:
                    return
                lane = self._turn.popleft()
                job, work = self._lanes[lane].popleft()
                if self._lanes[lane]:
                    self._turn.append(lane)
            self._run(job, work)

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
        """Stop taking queued jobs (they read interrupted on the next start)."""
        with self._lock:
            self._stopping = True
            self._waiting.notify_all()


def submit_as(store: JobStore, kind: str, body: BaseModel, work: Work, caller: Any, key) -> Job:
    """Submit `body` as `caller` (its role's lane, its own idempotency keys); the store's
    refusals as HTTP answers: 409 for a key reused with another body, 429 with Retry-After
    for a full lane."""
    from fastapi import HTTPException

    try:
        return store.submit(
            kind, body.model_dump(mode="json"), work,
            key=key, caller=caller.name, lane=caller.role.value,
        )  # fmt: skip
    except IdempotencyConflict as error:
        raise HTTPException(409, detail=str(error)) from None
    except QueueFull as error:
        headers = {"Retry-After": str(error.retry_after_s)}
        raise HTTPException(429, detail=str(error), headers=headers) from None
