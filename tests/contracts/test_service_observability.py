"""Observability every service shares (shared/kit/observability.py): `/metrics` on the evaluator
and the analyst as real `intraskill ... serve` processes, job counts by kind and outcome, and
JSON logs switched on by each service's one setting."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from shared.kit.auth import hash_token
from shared.kit.observability import ServiceMetrics
from shared.kit.service_jobs import JobStore
from tests.live_servers import free_port, live_server

# The trainer's token, the one grant both services admit here: the API wants a token, /metrics not
TRAINER_TOKEN = "observability-test-trainer"
GRANTS = json.dumps(
    [{"name": "trainer", "role": "trainer", "token_sha256": hash_token(TRAINER_TOKEN)}]
)
AS_TRAINER = {"Authorization": f"Bearer {TRAINER_TOKEN}"}


def samples_of(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    answer = httpx.get(f"{url}/metrics", timeout=120)  # no token: counters only
    assert answer.status_code == 200, answer.text
    return samples_of(answer.text)


def key(name: str, **labels: str) -> tuple[str, frozenset]:
    return name, frozenset(labels.items())


def json_log_lines(log: Path) -> list[dict]:
    """The log's lines after the CLI's banner: each must be one JSON object."""
    lines = log.read_text().splitlines()[1:]
    assert lines, "nothing logged"
    return [json.loads(line) for line in lines]


def test_job_store_counts_and_times_jobs_by_kind_and_outcome(tmp_path: Path) -> None:
    metrics = ServiceMetrics("test")
    store = JobStore(tmp_path, metrics=metrics)

    def fails(_context):
        raise RuntimeError("planted")

    jobs = [
        store.submit("gate", {}, lambda _context: {"ok": True}),
        store.submit("gate", {}, fails),
        store.submit("eval", {}, fails),
    ]
    deadline = time.monotonic() + 30
    while any(store.get(job.id).status in ("queued", "running") for job in jobs):
        assert time.monotonic() < deadline, "jobs did not finish"
        time.sleep(0.01)
    store.shutdown()
    samples = samples_of(metrics.exposition().decode())
    for kind, outcome in [("gate", "succeeded"), ("gate", "failed"), ("eval", "failed")]:
        labels = {"service": "test", "kind": kind, "outcome": outcome}
        assert samples[key("jobs_finished_total", **labels)] == 1
        assert samples[key("job_duration_seconds_count", **labels)] == 1
    assert key("jobs_finished_total", service="test", kind="eval", outcome="succeeded") not in (
        samples
    )


def test_analyst_serves_metrics_and_json_logs(tmp_path: Path) -> None:
    env = {
        "ANALYST_DATA_DIR": str(tmp_path / "data"),
        "ANALYST_REGISTRY_URL": f"http://127.0.0.1:{free_port()}",  # nothing there
        "ANALYST_JSON_LOGS": "true",
        "ANALYST_TOKENS": GRANTS,
    }
    log = tmp_path / "analyst.log"
    compile_body = {
        "run_id": "run-a", "round": 0, "bank_id": 1,
        "policy": {"checkpoint_id": "c", "backend": "procedural"},
    }  # fmt: skip
    with (
        live_server(["analyst", "serve"], env, log) as url,
        httpx.Client(headers=AS_TRAINER, timeout=120) as http,
    ):
        assert http.get(f"{url}/v1/jobs/compile-nope").status_code == 404
        # no registry token is configured: the job is refused at submit (issue 34: every
        # reference a job needs is checked before it is accepted), as a deployment problem
        refused = http.post(f"{url}/v1/compile-jobs", json=compile_body)
        assert refused.status_code == 502 and "ANALYST_REGISTRY_TOKEN" in refused.text
        samples = scrape(url)

    def requests(method: str, route: str, status: int) -> float:
        labels = {"service": "analyst", "method": method, "route": route, "status": str(status)}
        return samples.get(key("http_requests_total", **labels), 0)

    assert requests("GET", "/v1/jobs/{job_id}", 404) == 1
    assert requests("POST", "/v1/compile-jobs", 502) == 1
    assert key("http_requests_total", service="analyst", method="GET", route="/metrics",
               status="200") not in samples  # fmt: skip
    lines = json_log_lines(log)
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert any(line["message"].startswith("Application startup complete") for line in lines)


def test_evaluator_serves_metrics_and_json_logs(tmp_path: Path) -> None:
    env = {
        "EVALUATOR_JOBS_DIR": str(tmp_path / "jobs"),
        "EVALUATOR_REGISTRY_URL": f"http://127.0.0.1:{free_port()}",
        "EVALUATOR_JSON_LOGS": "1",
        "EVALUATOR_TOKENS": GRANTS,
    }
    log = tmp_path / "evaluator.log"
    with (
        live_server(["gate", "serve"], env, log) as url,
        httpx.Client(headers=AS_TRAINER, timeout=120) as http,
    ):
        assert http.get(f"{url}/v1/gate-jobs/gate-nope").status_code == 404
        assert http.get(f"{url}/readyz").status_code == 503  # no registry, no token
        samples = scrape(url)
    labels = {"service": "evaluator", "method": "GET", "route": "/v1/gate-jobs/{job_id}"}
    assert samples[key("http_requests_total", **labels, status="404")] == 1
    assert samples[key("http_request_duration_seconds_count", **labels)] == 1
    assert samples[key("http_requests_total", **{**labels, "route": "/readyz"}, status="503")] == 1
    assert all(line["level"] for line in json_log_lines(log))
