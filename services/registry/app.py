"""The registry's FastAPI application factory."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

from services.registry.aliases.routes import router as aliases_router
from services.registry.audit.routes import router as audit_router
from services.registry.auth import TokenTable
from services.registry.banks.cache import FrozenBankCache
from services.registry.banks.fastpath import FrozenBankFastPath
from services.registry.banks.routes import router as banks_router
from services.registry.body_limit import BodySizeLimit
from services.registry.cards.routes import router as cards_router
from services.registry.chunks.routes import router as chunks_router
from services.registry.concurrency import IdempotentReplay, replay_response
from services.registry.db import make_engine, make_session_factory, make_write_engine
from services.registry.errors import install_error_handlers
from services.registry.evidence.routes import router as evidence_router
from services.registry.gates.routes import router as gates_router
from services.registry.settings import RegistrySettings, get_settings
from services.registry.threads import run_blocking
from shared.observability import ServiceMetrics, instrument

API_PREFIX = "/v1"


def _ping(engine: Engine) -> None:
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")


def _roles_of(dependant: Dependant) -> list[str] | None:
    for dependency in dependant.dependencies:
        roles = getattr(dependency.call, "roles", None)
        if roles is not None:
            return roles
        nested = _roles_of(dependency)
        if nested is not None:
            return nested
    return None


def _publish_roles(router: APIRouter) -> None:
    """Put each role-gated operation's allowed roles in its OpenAPI entry as `x-roles`."""
    for route in router.routes:
        if isinstance(route, APIRoute):
            roles = _roles_of(route.dependant)
            if roles is not None:
                route.openapi_extra = {**(route.openapi_extra or {}), "x-roles": roles}


def _watch_pool(metrics: ServiceMetrics, prefix: str, engine: Engine) -> None:
    """Gauges of `engine`'s connection pool, read at scrape time."""
    pool = engine.pool
    if not isinstance(pool, QueuePool):  # other pools keep no count to show
        return
    metrics.gauge_from(f"{prefix}_size", "connections kept open", pool.size)
    metrics.gauge_from(f"{prefix}_checked_out", "connections in use", pool.checkedout)
    metrics.gauge_from(f"{prefix}_overflow", "connections opened past the size", pool.overflow)


def create_app(settings: RegistrySettings | None = None) -> FastAPI:
    """A registry app bound to `settings` (default: read from the environment)."""
    settings = settings or get_settings()
    engine = make_engine(settings)
    write_engine = make_write_engine(settings, engine)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The loop's default limiter: every run_in_threadpool and run_blocking call queues on it.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.db_threads
        # What start-up built (routes, models, table metadata: ~130k objects) lives as long as
        # the process; frozen, the collector's full passes skip it. Unfrozen, each full pass
        # took 50-150 ms under load, stalling every request on that worker.
        gc.freeze()
        yield
        engine.dispose()
        write_engine.dispose()

    app = FastAPI(
        title="IntraSkill SkillBank registry",
        version="1.0.0",
        description=(
            "Chunks, banks, aliases, gate runs, failure cards, candidates, trainer evidence and "
            "the audit log. Bearer-token auth; see docs/registry.md."
        ),
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.write_engine = write_engine
    app.state.write_session_factory = make_session_factory(write_engine)
    app.state.tokens = TokenTable(settings.tokens)
    app.state.bank_cache = FrozenBankCache(settings.bank_cache_size)
    if settings.frozen_bank_fast_path:
        app.add_middleware(FrozenBankFastPath, registry=app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_error_handlers(app)
    app.add_exception_handler(IdempotentReplay, replay_response)
    # outermost: it times the fast path and the body limit too
    metrics = instrument(app, "registry")
    _watch_pool(metrics, "db_pool", engine)
    if write_engine is not engine:
        _watch_pool(metrics, "db_write_pool", write_engine)

    # Flat: each domain router straight onto the app (nesting costs route-matching time), the
    # hot frozen-bank routes first.
    for router in (
        banks_router,
        aliases_router,
        chunks_router,
        gates_router,
        cards_router,
        evidence_router,
        audit_router,
    ):
        _publish_roles(router)
        app.include_router(router, prefix=API_PREFIX)

    @app.get("/healthz", tags=["meta"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (no database round trip)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["meta"],
        responses={503: {"description": "the database does not answer; Retry-After set"}},
    )
    async def readyz(request: Request) -> dict[str, str]:
        """Readiness: the database answers a query (503 + Retry-After when it does not)."""
        await run_blocking(request, _ping, engine)
        return {"status": "ready"}

    return app
