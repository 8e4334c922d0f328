"""Async jobs as the evaluator runs them: `submit` returns at once with an id, the work runs on
a worker thread, state is mirrored to `<root>/<id>/job.json` (a job running when the process
stopped is reported failed, "interrupted", on the next start). A submission that carries an
idempotency key already seen returns the job it made the first time."""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Job:
    id: str
    kind: str
    request: dict[str, Any]
    status: str = "queued"
    created_at: str = field(default_factory=now)
    started_at: str | None = None
    finished_at: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = None
    idempotency_key: str | None = None

    def public(self) -> dict[str, Any]:
        record = asdict(self)
        record.pop("idempotency_key")
        return record


class Progress:
    """What running work reports through: its folder and a progress line."""

    def __init__(self, store: JobStore | None, job: Job | None, folder: Path) -> None:
        self._store, self._job, self.folder = store, job, folder
        folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._store is not None and self._job is not None:
            progress = {"stage": stage, "done": done, "total": total}
            self._store.update(self._job.id, progress=progress)


Work = Callable[[Progress], dict[str, Any]]


class JobStore:
    def __init__(self, root: Path, *, max_workers: int = 1) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="analyst-job")
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
        folder = self.root / job.id
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / "job.tmp"
        temporary.write_text(json.dumps(asdict(job), indent=1), encoding="utf-8")
        temporary.replace(folder / "job.json")

    def update(self, job_id: str, **changes: Any) -> Job:
        with self._lock:
            job = self._jobs[job_id]
            for key, value in changes.items():
                setattr(job, key, value)
            self._write(job)
            return job

    def submit(
        self, kind: str, request: dict[str, Any], work: Work, *, key: str | None = None
    ) -> tuple[Job, bool]:
        """(the job, whether it is new); a known idempotency key returns the first job."""
        with self._lock:
            if key is not None:
                for job in self._jobs.values():
                    if job.idempotency_key == key and job.kind == kind:
                        return job, False
            job = Job(id=f"{kind}-{uuid.uuid4().hex[:12]}", kind=kind, request=request)
            job.idempotency_key = key
            self._jobs[job.id] = job
            self._write(job)
        self._pool.submit(self._run, job, work)
        return job, True

    def _run(self, job: Job, work: Work) -> None:
        self.update(job.id, status="running", started_at=now())
        folder = self.root / job.id
        try:
            result = work(Progress(self, job, folder))
        except Exception as error:  # a job's failure is its result; the service goes on
            (folder / "traceback.txt").write_text(traceback.format_exc())
            self.update(job.id, status="failed", error=f"{type(error).__name__}: {error}",
                        finished_at=now())  # fmt: skip
            return
        self.update(job.id, status="succeeded", result=result, finished_at=now())

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
