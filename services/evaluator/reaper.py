"""Close the registry gate runs whose job is gone, so a run never stays `open`.

A gate job closes its own run when it fails, but not when the process dies under it (SIGKILL,
a pod evicted) or when the registry is away at the moment it tries. The reaper closes them as
`failed` with a note that starts with "abandoned:" and says why: once when the service starts
(in the background: a registry that is away must not hold the start up) and then every
`reap_interval_s`. An open run is abandoned when

* a job of this service wrote its id down (`job.json`, `gate_run_id`) and is no longer queued
  or running (interrupted by a restart, or failed while the registry was away), or
* a job of this service that is gone never wrote a run id down, and this service's principal
  opened a run on that job's checkpoint after the job started: the process died between
  opening the run and writing its id down.

Runs of other principals, and runs of jobs still queued or running here, are left alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.contracts.registry_api.client import RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import GateRunPublic, GateStatus
from shared.kit.service_jobs import JobStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoneJob:
    """A gate job of this service that will never close a run: its id, checkpoint, and when it
    ran (to the second, as `job.json` says; `until` is one second past its end)."""

    id: str
    checkpoint_id: str
    since: datetime
    until: datetime


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def abandoned_reason(
    run: GateRunPublic, *, owners: dict[int, str], live: set[int], unrecorded: list[GoneJob],
    me: str,
) -> str | None:  # fmt: skip
    """Why `run` (open) is abandoned, or None while a job of this process may still close it."""
    if run.id in live:
        return None
    if run.id in owners:
        return f"abandoned: job {owners[run.id]} ended without closing its gate run"
    if run.created_by != me:
        return None
    for job in unrecorded:
        if (
            run.checkpoint_id == job.checkpoint_id
            and job.since <= _aware(run.created_at) < job.until
        ):
            return f"abandoned: job {job.id} stopped before it wrote the run's id down"
    return None


def reap_once(client: RegistryClient, jobs: JobStore) -> list[int]:
    """Close every open gate run whose job is gone; the ids closed."""
    owners, live, unrecorded = {}, set(), []
    for job in jobs.list():
        running = job.status in ("queued", "running")
        if job.gate_run_id is not None:
            owners[job.gate_run_id] = job.id
            if running:
                live.add(job.gate_run_id)
        elif not running and job.started_at and job.finished_at and "checkpoint_id" in job.request:
            since = datetime.fromisoformat(job.started_at)
            until = datetime.fromisoformat(job.finished_at) + timedelta(seconds=1)
            unrecorded.append(GoneJob(job.id, job.request["checkpoint_id"], since, until))
    if not owners.keys() - live and not unrecorded:
        return []  # nothing of ours can be open: no registry call
    me = client.whoami()["name"]
    closed = []
    for run in client.list_gate_runs(status=GateStatus.open):
        reason = abandoned_reason(run, owners=owners, live=live, unrecorded=unrecorded, me=me)
        if reason is None:
            continue
        try:
            client.close_gate_run(run.id, GateStatus.failed, note=reason)
        except RegistryError as refusal:  # closed meanwhile by its own job
            logger.warning("gate run %s not closed: %s", run.id, refusal)
            continue
        logger.info("gate run %s closed: %s", run.id, reason)
        closed.append(run.id)
    return closed


class GateRunReaper:
    """`reap_once` at start and every `interval_s` seconds, on a thread of its own."""

    def __init__(
        self, clients: Callable[[], RegistryClient], jobs: JobStore, *, interval_s: float
    ) -> None:
        self._clients, self._jobs, self._interval_s = clients, jobs, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="evaluator-reaper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self._clients() as client:
                    reap_once(client, self._jobs)
            except Exception as error:  # the registry away, a token unset: try again later
                logger.warning("gate run reaper: %s: %s", type(error).__name__, error)
            self._stop.wait(self._interval_s)
