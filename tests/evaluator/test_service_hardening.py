"""The evaluator hardened as the registry is, tried as a new user and as an attacker would
(issue 34), against the real `intraskill gate serve` process on loopback (procedural TEST
DOUBLE backend, the live registry). Each test names the issue's item it holds to."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from gate_service_support import client, content

from shared.http_retry import wait_until_ready
from shared.registry_api.schemas import ChunkSource, GateStatus
from tests.live_servers import free_port, start_server
from tests.service_bodies import assert_bodies_are_limited_then_authenticated_then_parsed
from tests.service_servers import bearer, evaluator_env, evaluator_serving


@pytest.fixture(scope="module")
def evaluator(registry_url, tmp_path_factory):
    with evaluator_serving(registry_url, tmp_path_factory.mktemp("evaluator-hardening")) as url:
        yield url


@pytest.fixture
def drafts(registry_url) -> dict:
    """Two cold-start drafts and a base checkpoint: a Gate A the `val` split (20 tasks) fits."""
    tag = uuid.uuid4().hex[:6]
    with client(registry_url, "trainer") as trainer, client(registry_url, "analyst") as analyst:
        checkpoint = f"base-{tag}"
        trainer.create_checkpoint(checkpoint, uri="file:///procedural", step=0, round=0)
        versions = [
            analyst.create_chunk(
                f"h{i}-{tag}", content(f"h{i}-{tag}"), source=ChunkSource.cold_start
            ).latest
            for i in range(2)
        ]
    return {
        "checkpoint_id": checkpoint,
        "draft_version_ids": [version.id for version in versions],
        "alias": f"cur-{tag}",
    }


@pytest.mark.parametrize("path", ["/v1/gate-jobs", "/v1/gate-a-jobs", "/v1/eval-jobs"])
def test_1_bodies_are_limited_then_authenticated_then_parsed(evaluator, path):
    role = {"/v1/gate-jobs": "trainer", "/v1/gate-a-jobs": "analyst"}.get(path, "operator")
    assert_bodies_are_limited_then_authenticated_then_parsed(evaluator, path, bearer(role))


def _start(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = start_server(["gate", "serve"], port, env, log)
    url = f"http://127.0.0.1:{port}"
    wait_until_ready(url, process, timeout=180, log=log)
    return process, url


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return value


def test_2_an_evaluator_killed_mid_gate_leaves_no_open_gate_run_after_its_next_start(
    registry_url, drafts, tmp_path
):
    """SIGKILL while Gate A's rollouts run (each procedural turn takes 0.25 s, so the gate
    runs for a minute): the run is open in the registry and `job.json` names it; the next
    start closes it as failed, with a note saying it was abandoned, and the job reads
    interrupted."""
    slow = {"EVALUATOR_BACKEND_OPTIONS": json.dumps({"turn_delay_s": 0.25})}
    env = evaluator_env(registry_url, tmp_path, slow)
    process, url = _start(env, tmp_path / "first.log")
    try:
        answer = httpx.post(
            f"{url}/v1/gate-a-jobs", json=drafts, headers=bearer("analyst"), timeout=120
        )
        assert answer.status_code == 202, answer.text
        location = url + answer.headers["location"]

        def opened_run():
            job = httpx.get(location, headers=bearer("reader"), timeout=60).json()
            assert job["status"] in ("queued", "running"), job
            return job.get("gate_run_id")

        run_id = _until(opened_run, 120, "the gate job never opened its registry run")
    finally:
        process.kill()
        process.wait()
    job_file = tmp_path / "jobs" / answer.json()["id"] / "job.json"
    assert json.loads(job_file.read_text())["gate_run_id"] == run_id
    with client(registry_url, "reader") as registry:
        assert registry.get_gate_run(run_id).status == GateStatus.open

        process, url = _start(env, tmp_path / "second.log")
        try:
            run = _until(
                lambda: (r := registry.get_gate_run(run_id)).status != GateStatus.open and r,
                60,
                "the restarted evaluator left the gate run open",
            )
            job = httpx.get(location.replace(location.split("/v1")[0], url),
                            headers=bearer("reader"), timeout=60).json()  # fmt: skip
        finally:
            process.kill()
            process.wait()
    assert run.status == GateStatus.failed
    assert run.note.startswith("abandoned:") and job["id"] in run.note, run.note
    assert (job["status"], job["error"], job["gate_run_id"]) == ("failed", "interrupted", run_id)
    assert not registry_open_runs(registry_url, drafts["checkpoint_id"])


def registry_open_runs(registry_url: str, checkpoint_id: str) -> list:
    with client(registry_url, "reader") as registry:
        return registry.list_gate_runs(status=GateStatus.open, checkpoint_id=checkpoint_id)
