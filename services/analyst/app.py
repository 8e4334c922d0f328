"""The analyst service: all-wrong groups in, round compilations and the cold start as async
jobs (POST -> 202 + job id, GET polls), funnels out.

    intraskill analyst serve --port 8200      # reads ANALYST_* settings

Routes are thin: validate, store or submit, answer. The contract is `shared/contracts/analyst_api`.
Every route but `/healthz`, `/readyz` and `/metrics` wants a bearer token (`shared/kit/auth.py`,
grants in ANALYST_TOKENS) whose role the route admits: 401 without one, 403 for another role.
Bodies pass `shared/kit/request_body.py` first (413 past 1 MiB, 401 before the body is read). A job
POST's `Idempotency-Key` is the caller's own, bound to the body (replay, or 409); what a job
needs from the registry is checked at submit (422 naming the field, 503 + Retry-After when the
registry is away); each submitter role queues at most `max_queued` jobs (429 + Retry-After).
The probes are coroutines that wait for no worker thread. Routes live in `routes/` (groups, jobs;
the probes: `shared/kit/readiness.py`); what they depend on in `deps.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.analyst.deps import AnalystContext
from services.analyst.routes import groups, jobs
from services.analyst.settings import AnalystSettings
from services.analyst.store import GroupStore
from shared.contracts.registry_api.client import RegistryClient
from shared.kit.auth import TokenTable, install_auth_errors, publish_roles
from shared.kit.observability import instrument
from shared.kit.readiness import probes_router
from shared.kit.request_body import SERVICE_JSON_DEPTH, RequestBodyGuard
from shared.kit.service_jobs import JobStore
from shared.kit.validation_errors import install_validation_errors


def create_app(
    settings: AnalystSettings | None = None,
    *,
    client_factory: Callable[[], RegistryClient] | None = None,
    analyzer=None,
    similar=None,
    compiler=None,
) -> FastAPI:
    """The app; the registry client, the failure analyst, the compiler and the dedupe default
    to settings' and the request's backend names."""
    settings = settings or AnalystSettings()
    context = AnalystContext.build(
        settings, client_factory, analyzer=analyzer, similar=similar, compiler=compiler
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.jobs = JobStore(
            settings.data_dir / "jobs", max_workers=settings.max_workers,
            max_queued=settings.max_queued, retry_after_s=settings.queue_retry_after_s,
            name="analyst", metrics=app.state.metrics,
        )  # fmt: skip
        app.state.groups = GroupStore(
            settings.data_dir, max_per_caller=settings.max_groups_per_caller
        )
        yield
        app.state.jobs.shutdown()

    app = FastAPI(title="IntraSkill analyst", version="1", lifespan=lifespan)
    app.state.context = context
    app.state.tokens = TokenTable(settings.tokens)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=SERVICE_JSON_DEPTH,
        tokens=app.state.tokens,
    )  # fmt: skip
    install_auth_errors(app)
    install_validation_errors(app)
    instrument(
        app, "analyst", metrics_port=settings.metrics_port, metrics_host=settings.metrics_host
    )
    app.include_router(probes_router("analyst", "data_dir"))
    for routes in (groups, jobs):
        publish_roles(routes.router.routes)  # before the app copies the routes
        app.include_router(routes.router)
    return app
