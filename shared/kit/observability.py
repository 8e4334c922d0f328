"""What every service shares for being watched: Prometheus metrics and JSON logs.

Each app owns its own `CollectorRegistry` (not the process-global one), so two apps in one
process (tests, the local stack) never collide and a scrape shows only that app's figures.
`/metrics` holds counters, histograms and gauges only: no ids, names, tokens or bodies, which is
why it stays open beside `/healthz` while the API behind it wants a token. A service given a
metrics port of its own serves it there alone (a second listener, the API port answers 404), so
that a NetworkPolicy, which admits ports and not paths, can open it to Prometheus only.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from pydantic import Field
from pydantic_settings import BaseSettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

METRICS_PATH = "/metrics"
# A path that matched no route is counted under one label, so scanners probing random URLs
# cannot grow the series without bound.
UNMATCHED = "<unmatched>"
# A middleware that answers before routing (the registry's frozen-bank fast path) names the
# route template it served here, so its requests count under the same label as the route's.
ROUTE_TEMPLATE_KEY = "intraskill.route_template"
JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400)


class MetricsPortSettings(BaseSettings):
    """Where a service serves `/metrics`: a port of its own when set (deploy/ sets one per
    service and opens it to Prometheus alone), else beside the API. Each service's settings
    class inherits these under its own prefix (REGISTRY_METRICS_PORT, ...)."""

    metrics_port: int | None = Field(
        None, ge=1, le=65535,
        description="serve /metrics on this port alone (not on the API's); unset: on the API's",
    )  # fmt: skip
    metrics_host: str | None = Field(
        None, description="the metrics port's address; unset: the API's --host"
    )


class ServiceMetrics:
    """One service's Prometheus figures: requests by route template and status, jobs by kind
    and outcome; `gauge_from` adds a gauge read at scrape time (connection pool use)."""

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "http_requests", "HTTP requests answered",
            ["service", "method", "route", "status"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "http_request_duration_seconds", "time from request to the response's last byte",
            ["service", "method", "route"], registry=self.registry,
        )  # fmt: skip
        self.jobs = Counter(
            "jobs_finished", "jobs finished", ["service", "kind", "outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.job_duration = Histogram(
            "job_duration_seconds", "a job's run time, start to finish",
            ["service", "kind", "outcome"], buckets=JOB_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.service = service

    def request_done(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(self.service, method, route, str(status)).inc()
        self.latency.labels(self.service, method, route).observe(seconds)

    def job_done(self, kind: str, outcome: str, seconds: float) -> None:
        self.jobs.labels(self.service, kind, outcome).inc()
        self.job_duration.labels(self.service, kind, outcome).observe(seconds)

    def gauge_from(self, name: str, help: str, read: Callable[[], float]) -> None:
        Gauge(name, help, registry=self.registry).set_function(read)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def route_template(scope: Scope) -> str:
    """The matched route's template (`/v1/jobs/{job_id}`), never the raw path.

    FastAPI puts the route as its router declared it in the scope (`/jobs/{job_id}`, without
    the `/v1` it was included under); the prefix is the request path's leading segments, which
    are literal here (no router is included under a path parameter).
    """
    route_path = getattr(scope.get("route"), "path", None)
    if not route_path:
        return scope.get(ROUTE_TEMPLATE_KEY) or UNMATCHED
    depth = route_path.count("/")
    prefix = "/".join(scope["path"].split("/")[: scope["path"].count("/") - depth + 1])
    return prefix + route_path


class RequestMetrics:
    """Pure ASGI middleware (no body buffering): counts and times each HTTP request."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == METRICS_PATH:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            self.metrics.request_done(
                scope["method"], route_template(scope), status, time.perf_counter() - started
            )


def instrument(
    app: FastAPI,
    service: str,
    *,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
) -> ServiceMetrics:
    """Count `app`'s requests and serve them at `/metrics`: on the app's own port, or with
    `metrics_port` on a listener of its own at `metrics_host` (default loopback; started and
    stopped with the app). Returns the metrics for jobs and gauges. Call after the app's other
    middleware, so this one is outermost and times them."""
    metrics = ServiceMetrics(service)
    app.state.metrics = metrics
    app.add_middleware(RequestMetrics, metrics=metrics)
    if metrics_port is not None:
        serve_metrics_apart(app, metrics, metrics_host or "127.0.0.1", metrics_port)
        return metrics

    @app.get(METRICS_PATH, include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return metrics


def serve_metrics_apart(app: FastAPI, metrics: ServiceMetrics, host: str, port: int) -> None:
    """`/metrics` on `host:port` (prometheus_client's threaded server) for as long as `app`
    runs: its lifespan is wrapped, so the port opens before the first request and closes at
    shutdown. A port in use fails the start."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(lifespan_app: FastAPI) -> AsyncIterator[object]:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
        try:
            async with inner(lifespan_app) as state:
                yield state
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    app.router.lifespan_context = lifespan


def log_config(json_logs: bool) -> dict[str, Any] | None:
    """uvicorn's `log_config`: one JSON object per line when `json_logs`, else None (keep
    uvicorn's own). The root logger is configured too, so the services' loggers follow."""
    if not json_logs:
        return None
    formatter = {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
        "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
    }
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": "INFO"},
        "loggers": {
            name: {"handlers": ["default"], "level": "INFO", "propagate": False}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }


def uvicorn_logging(json_logs: bool) -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run`: JSON logs, or nothing (uvicorn's own format)."""
    config = log_config(json_logs)
    return {} if config is None else {"log_config": config}
