"""The registry's FastAPI application factory."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

from services.registry.aliases.routes import router as aliases_router
from services.registry.audit.routes import router as audit_router
from services.registry.banks.cache import FrozenBankCache
from services.registry.banks.fastpath import FrozenBankFastPath
from services.registry.banks.routes import router as banks_router
from services.registry.cards.routes import router as cards_router
from services.registry.chunks.routes import router as chunks_router
from services.registry.concurrency import IdempotentReplay, replay_response
from services.registry.db import (
    make_engine,
    make_probe_engine,
    make_session_factory,
    make_write_engine,
)
from services.registry.deps import Reader
from services.registry.errors import ServiceUnavailable, install_error_handlers
from services.registry.evidence.routes import router as evidence_router
from services.registry.gates.routes import router as gates_router
from services.registry.headers import StandardHeaders
from services.registry.settings import RegistrySettings, get_settings
from services.registry.unit_of_work import GroupCommit
from shared.contracts.registry_api.schemas import MAX_JSON_DEPTH
from shared.kit.auth import TokenTable, publish_roles
from shared.kit.observability import ServiceMetrics, instrument
from shared.kit.request_body import RequestBodyGuard

API_PREFIX = "/v1"
# A request body may hold a free-form document (MAX_JSON_DEPTH levels) a few levels down; any
# body nested deeper than this is refused whole (422) before it is parsed.
MAX_REQUEST_JSON_DEPTH = 2 * MAX_JSON_DEPTH
# Probes running at once; one stuck on a frozen database ends at its connect timeout.
READY_PROBES_AT_ONCE = 4


def _probe_write(engine: Engine) -> None:
    """The cheapest write each database commits to disk: a read-only file, a full disk or a
    read-only server fail it, where `SELECT 1` still answered."""
    with engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            # Rewrites the header's user_version with its own value: one page, committed.
            version = int(connection.exec_driver_sql("PRAGMA user_version").scalar_one())
            connection.exec_driver_sql(f"PRAGMA user_version = {version}")
            # A pooled connection opened the file before it turned read-only and writes its WAL
            # still; the next connection could not open it for writing at all: ask as it would.
            path = engine.url.database
            if path and path != ":memory:":
                try:
                    os.close(os.open(path, os.O_RDWR))
                except OSError as error:
                    raise ServiceUnavailable(
                        f"the database file takes no writes ({error.strerror}); retry shortly"
                    ) from None
            return
        # Assigning a transaction id makes the commit write and flush a WAL record (a standby
        # refuses it); a read-only default refuses every write yet lets this through, so asked.
        read_only = connection.exec_driver_sql(
            "SELECT current_setting('transaction_read_only'), pg_current_xact_id()"
        ).first()[0]
        if read_only == "on":
            raise ServiceUnavailable("the database takes no writes (read-only); retry shortly")


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
    probe_engine = make_probe_engine(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The loop's default limiter: every run_blocking (and run_read) call queues on it.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.db_threads
        # What start-up built (routes, models, table metadata: ~130k objects) lives as long as
        # the process; frozen, the collector's full passes skip it. Unfrozen, each full pass
        # took 50-150 ms under load, stalling every request on that worker.
        gc.freeze()
        yield
        engine.dispose()
        write_engine.dispose()
        probe_engine.dispose()

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
    # Readiness probes run on threads of their own: never queued behind database work.
    probe_limiter = anyio.CapacityLimiter(READY_PROBES_AT_ONCE)
    app.state.tokens = TokenTable(settings.tokens)
    app.state.bank_cache = FrozenBankCache(settings.bank_cache_size)
    app.state.group_commit = GroupCommit()
    if settings.frozen_bank_fast_path:
        app.add_middleware(FrozenBankFastPath, registry=app)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=MAX_REQUEST_JSON_DEPTH
    )
    app.add_middleware(StandardHeaders)  # added last: outermost, so every answer has them
    install_error_handlers(app)
    app.add_exception_handler(IdempotentReplay, replay_response)
    # outermost: it times the fast path and the body limit too
    metrics = instrument(
        app, "registry", metrics_port=settings.metrics_port, metrics_host=settings.metrics_host
    )
    _watch_pool(metrics, "db_pool", engine)
    if write_engine is not engine:
        _watch_pool(metrics, "db_write_pool", write_engine)

    # Flat: each domain router straight onto the app (nesting costs route-matching time), the
    # hot routes first: frozen-bank reads, then card POSTs (the hottest write). Matching tries
    # routes in this order and their paths are disjoint, so the order changes only the time
    # (profiled: 13 % of a card POST's GIL time went to matching 34 routes ahead of it).
    for router in (
        banks_router,
        cards_router,
        aliases_router,
        chunks_router,
        gates_router,
        evidence_router,
        audit_router,
    ):
        publish_roles(router.routes)
        app.include_router(router, prefix=API_PREFIX)

    @app.get("/healthz", tags=["meta"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (no database round trip)."""
        return {"status": "ok"}

    @app.get("/v1/whoami", tags=["meta"])
    async def whoami(principal: Reader) -> dict[str, str]:
        """The token's actor name and role, so a client can show only what that role may do."""
        return {"name": principal.name, "role": principal.role.value}

    @app.get(
        "/readyz",
        tags=["meta"],
        responses={
            503: {"description": "the database does not answer or take writes; Retry-After set"}
        },
    )
    async def readyz() -> dict[str, str]:
        """Readiness: the database commits a probe write (`_probe_write`) on a connection of
        the probe's own, within `ready_timeout_s` (503 + Retry-After when it does not),
        whatever the pool is doing."""
        with anyio.move_on_after(settings.ready_timeout_s):
            await anyio.to_thread.run_sync(
                _probe_write, probe_engine, abandon_on_cancel=True, limiter=probe_limiter
            )
            return {"status": "ready"}
        raise ServiceUnavailable(
            f"the database did not answer within {settings.ready_timeout_s:g} s; retry shortly"
        )

    return app
