"""The registry's Prometheus `/metrics`, read from a real `intraskill registry serve` on
Postgres: requests counted by route template and status (the frozen-bank fast path under its
route's name), the connection pool's gauges, and no auth needed to scrape (counters only)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import httpx
from live_server import serve_registry
from prometheus_client.parser import text_string_to_metric_families
from registry_support import free_port

from shared.contracts.registry_api.schemas import Role
from tests.live_servers import REPO, scratch_postgres_database


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of an anonymous scrape, keyed by (name, labels)."""
    answer = httpx.get(f"{url}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def requests_counted(samples, method: str, route: str, status: int) -> float:
    labels = {"service": "registry", "method": method, "route": route, "status": str(status)}
    return samples.get(("http_requests_total", frozenset(labels.items())), 0)


def test_registry_metrics_by_route_template_status_and_pool() -> None:
    with scratch_postgres_database(prefix="metrics") as url, serve_registry(url) as registry:
        bank = registry.bank([registry.chunk(f"m-{uuid.uuid4().hex[:8]}")["latest"]["id"]])
        # the first read fills the frozen-bank cache through the route; the second is answered
        # by the fast path before routing: both are one route to whoever reads the dashboard
        for _ in range(2):
            registry.ok("GET", f"/v1/banks/{bank['id']}")
        assert registry.call("GET", "/v1/banks/999999").status_code == 404
        assert httpx.get(f"{registry.url}/v1/banks/{bank['id']}").status_code == 401
        assert registry.call("GET", "/no/such/path").status_code == 404
        assert registry.call("GET", "/v1/chunks", Role.trainer).status_code in (200, 403)

        samples = scrape(registry.url)

    template = "/v1/banks/{bank_id}"
    assert requests_counted(samples, "GET", template, 200) == 2
    assert requests_counted(samples, "GET", template, 404) == 1
    assert requests_counted(samples, "GET", template, 401) == 1
    assert requests_counted(samples, "POST", "/v1/banks/{bank_id}/freeze", 200) == 1
    # a raw path never becomes a label: unknown paths share one series
    assert requests_counted(samples, "GET", "<unmatched>", 404) == 1
    routes = {dict(labels).get("route") for _, labels in samples}
    assert f"/v1/banks/{bank['id']}" not in routes and "/no/such/path" not in routes
    latency_count = ("http_request_duration_seconds_count", frozenset(
        {"service": "registry", "method": "GET", "route": template}.items()
    ))  # fmt: skip
    assert samples[latency_count] == 4
    # the pool's size is the shipped REGISTRY_POOL_SIZE default (32); at rest nothing is out
    assert samples[("db_pool_size", frozenset())] == 32
    assert samples[("db_pool_checked_out", frozenset())] == 0


def test_a_metrics_port_of_its_own_serves_metrics_there_and_not_on_the_api_port() -> None:
    """With REGISTRY_METRICS_PORT (as deploy/ sets it) a NetworkPolicy can open /metrics to
    Prometheus alone: it answers on that port, the API port answers 404 for it, and the
    scrape still counts the API's requests."""
    metrics_port = free_port()
    with (
        scratch_postgres_database(prefix="metrics") as url,
        serve_registry(url, metrics_port=str(metrics_port)) as registry,
    ):
        assert httpx.get(f"{registry.url}/metrics", timeout=30).status_code == 404
        assert registry.call("GET", "/v1/banks/999999").status_code == 404
        samples = scrape(f"http://127.0.0.1:{metrics_port}")
        # the metrics listener serves nothing of the API: any path there is the scrape
        api_on_metrics_port = httpx.get(f"http://127.0.0.1:{metrics_port}/v1/whoami", timeout=30)
        assert "http_requests_total" in api_on_metrics_port.text
    assert requests_counted(samples, "GET", "/v1/banks/{bank_id}", 404) == 1
    assert requests_counted(samples, "GET", "<unmatched>", 404) == 0  # /metrics is not counted


def test_a_metrics_port_refuses_more_than_one_worker() -> None:
    """Every uvicorn worker would bind the metrics port: the second could not, and each would
    count only its own requests; `serve` refuses before it starts any."""
    run = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "registry", "serve", "--workers", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "REGISTRY_METRICS_PORT": "9000", "REGISTRY_TOKENS": "[]"},
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    assert "REGISTRY_METRICS_PORT" in run.stderr and "one worker" in run.stderr
