"""Engine and sessions: Postgres in deployment and tests, a SQLite file as the embedded default."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import JSON, Engine, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import sessionmaker
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
    """An engine for `settings.database_url`, with SQLite tuned for a single-file embedded store."""
    if settings.is_sqlite:
        ensure_sqlite_directory(settings.database_url)
        engine = create_engine(
            settings.database_url, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # pragma: no cover - sqlite only
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        max_overflow=settings.max_overflow,
        pool_pre_ping=True,
        pool_timeout=30,
    )


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: routes serialise objects after the dependency has committed.
    return sessionmaker(bind=engine, class_=Session, expire_on_commit=False, autoflush=False)
