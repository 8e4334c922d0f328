"""The evaluator service: gate, Gate A and evaluation jobs over HTTP (POST -> 202 + job id,
GET polls).

    intraskill gate serve --port 8100       # reads EVALUATOR_* settings

Routes are thin: validate, plan what is cheap to check now (so a bad request is a 4xx naming
the field, not a failed job), submit the job. Every route but `/healthz`, `/readyz` and
`/metrics` wants a bearer token (`shared/kit/auth.py`, grants in EVALUATOR_TOKENS) whose role the
route admits (`SUBMITTERS`, `OBSERVERS`): 401 without one, 403 for another role. Bodies pass
`shared/kit/request_body.py` first (413 past 1 MiB, 401 before the body is read). A job POST may
carry an `Idempotency-Key` (the caller's own, bound to the body: replay or 409); each submitter
role queues at most `max_queued` jobs (429 + Retry-After). The probes are coroutines that wait
for no worker thread (`shared/kit/readiness.py`, the analyst's too). Routes live in `routes/`
(jobs, refits); what they depend on in `deps.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.evaluator.deps import EvaluatorContext, TaskSource
from services.evaluator.reaper import GateRunReaper
from services.evaluator.routes import jobs, refits
from services.evaluator.runtime import RunnerFactory
from services.evaluator.settings import EvaluatorSettings
from shared.contracts.registry_api.client import RegistryClient
from shared.kit.auth import TokenTable, install_auth_errors, publish_roles
from shared.kit.observability import instrument
from shared.kit.readiness import probes_router
from shared.kit.request_body import SERVICE_JSON_DEPTH, RequestBodyGuard
from shared.kit.service_jobs import JobStore
from shared.kit.validation_errors import install_validation_errors


def create_app(
    settings: EvaluatorSettings | None = None,
    *,
    runner_factory: RunnerFactory | None = None,
    client_factory: Callable[[], RegistryClient] | None = None,
    task_source: TaskSource | None = None,
) -> FastAPI:
    """The app; the factories default to the agent runtime, the registry and the ShopSim world."""
    settings = settings or EvaluatorSettings()
    context = EvaluatorContext.build(settings, runner_factory, client_factory, task_source)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.jobs = JobStore(
            settings.jobs_dir, max_workers=settings.max_workers, max_queued=settings.max_queued,
            retry_after_s=settings.queue_retry_after_s, name="evaluator",
            metrics=app.state.metrics,
        )  # fmt: skip
        reaper = GateRunReaper(context.clients, app.state.jobs, interval_s=settings.reap_interval_s)
        reaper.start()
        yield
        reaper.stop()
        app.state.jobs.shutdown()

    app = FastAPI(title="IntraSkill evaluator", version="1", lifespan=lifespan)
    app.state.context = context
    app.state.tokens = TokenTable(settings.tokens)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=SERVICE_JSON_DEPTH,
        tokens=app.state.tokens,
    )  # fmt: skip
    install_auth_errors(app)
    install_validation_errors(app)
    instrument(
        app, "evaluator", metrics_port=settings.metrics_port, metrics_host=settings.metrics_host
    )
    app.include_router(probes_router("evaluator", "jobs_dir"))
    for routes in (jobs, refits):
        publish_roles(routes.router.routes)  # before the app copies the routes
        app.include_router(routes.router)
    return app
