"""Engine and sessions: Postgres in deployment and tests, a SQLite file as the embedded default."""

from __future__ import annotations

import math
from pathlib import Path

from sqlalchemy import JSON, Engine, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import sessionmaker
from sqlalchemy.pool import NullPool, QueuePool
from sqlmodel import Session

from services.registry.settings import RegistrySettings

# JSON documents (pools, reward components, card parts): JSONB on Postgres, JSON text elsewhere.
JSONType = JSON().with_variant(JSONB(), "postgresql")


def ensure_sqlite_directory(database_url: str) -> None:
    """Create the folder of a SQLite file URL (the embedded default lives under runs/)."""
    if database_url.startswith("sqlite") and "///" in database_url:
        path = database_url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)


def make_engine(settings: RegistrySettings) -> Engine:
    """The engine reads use: Postgres with timeouts, or a SQLite file in WAL mode."""
    if settings.is_sqlite:
        return _sqlite_engine(
            settings, begin="BEGIN", pool_size=settings.pool_size, wait_s=settings.pool_timeout_s
        )
    return create_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        max_overflow=settings.max_overflow,
        # No ping before each checkout: it is one more round trip on every request. A
        # connection the database dropped (a restart) fails its first use instead; that request
        # gets 503 + Retry-After, and the disconnect invalidates the whole pool, so the ones
        # after it get fresh connections.
        pool_pre_ping=False,
        pool_timeout=settings.pool_timeout_s,
        connect_args={
            "connect_timeout": settings.connect_timeout_s,
            # Server-side limits, so no request waits on a lock or a query without end: a
            # timeout is an error the registry answers with 503 + Retry-After.
            "options": (
                f"-c lock_timeout={settings.lock_timeout_ms}"
                f" -c statement_timeout={settings.statement_timeout_ms}"
                f" -c idle_in_transaction_session_timeout={settings.idle_in_transaction_ms}"
            ),
            # A silent peer (a frozen host) is noticed in seconds, not at the kernel's hours.
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
        },
    )


def make_probe_engine(settings: RegistrySettings) -> Engine:
    """The engine `/readyz` uses: a fresh connection per probe (no pool), with its own short
    timeouts, so readiness never waits behind the request pool or a connection a stuck
    request holds."""
    if settings.is_sqlite:
        ensure_sqlite_directory(settings.database_url)
        return create_engine(
            settings.database_url,
            poolclass=NullPool,
            connect_args={"check_same_thread": False, "timeout": settings.ready_timeout_s},
        )
    timeout_ms = int(settings.ready_timeout_s * 1000)
    return create_engine(
        settings.database_url,
        poolclass=NullPool,
        connect_args={
            # libpq counts whole seconds, at least 2.
            "connect_timeout": max(2, math.ceil(settings.ready_timeout_s)),
            "options": f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}",
        },
    )


def make_write_engine(settings: RegistrySettings, read_engine: Engine) -> Engine:
    """The engine writes use: on Postgres the read engine; on SQLite a single connection.

    SQLite allows one writer at a time. Left to itself it answers a second writer "database is
    locked" (or, for a reader upgrading to a writer, fails at once without waiting), so the
    registry queues its writers on a one-connection pool whose transactions start with
    `BEGIN IMMEDIATE` (taking the write lock up front, waiting `busy_timeout` for another
    process). A writer that cannot get the connection in `write_wait_s` is answered 503.
    """
    if not settings.is_sqlite:
        return read_engine
    return _sqlite_engine(
        settings, begin="BEGIN IMMEDIATE", pool_size=1, wait_s=settings.write_wait_s
    )


def _sqlite_engine(
    settings: RegistrySettings, *, begin: str, pool_size: int, wait_s: float
) -> Engine:
    ensure_sqlite_directory(settings.database_url)
    engine = create_engine(
        settings.database_url,
        connect_args={"check_same_thread": False},
        poolclass=QueuePool,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=wait_s,
    )
    busy_ms = int(settings.write_wait_s * 1000)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record) -> None:
        # The driver's own transaction handling is switched off (it would open transactions
        # behind SQLAlchemy's back and make a released SAVEPOINT commit); `begin` below emits
        # BEGIN itself, so savepoints nest inside a real transaction.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: routes serialise objects after the dependency has committed.
    return sessionmaker(bind=engine, class_=Session, expire_on_commit=False, autoflush=False)
