"""The registry's one settings class, read from the environment (and `.env`) at start."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from shared.contracts.registry_api.schemas import Name
from shared.kit.auth import TokenGrant
from shared.kit.observability import MetricsPortSettings

DEFAULT_SQLITE_PATH = Path("runs") / "registry.sqlite"


class RegistrySettings(MetricsPortSettings):
    """Everything the registry reads from its environment.

    `REGISTRY_TOKENS` is a JSON list of `{"name", "role", "token_sha256"}`; make entries with
    `intraskill registry token --name NAME --role ROLE`.
    """

    model_config = SettingsConfigDict(
        env_prefix="REGISTRY_", env_file=".env", extra="ignore", populate_by_name=True
    )

    database_url: str = Field(
        default=f"sqlite:///{DEFAULT_SQLITE_PATH}",
        validation_alias="DATABASE_URL",
        description="SQLAlchemy URL; postgresql://... in deployment, a SQLite file by default",
    )
    tokens: list[TokenGrant] = Field(default_factory=list)
    protected_aliases: list[Name] = Field(default_factory=lambda: ["production"])
    # At least the database work a worker runs at once (`db_threads`, plus the threads of any
    # request that timed out and left its work running): connections past pool_size are opened
    # and closed per checkout, and that churn (a Postgres backend per connect) halves write
    # throughput under load.
    pool_size: int = Field(default=32, ge=1, le=200)
    # Database work waits in a first-come queue for one of this many threads per worker. More
    # threads only fight over the GIL: requests then finish in no particular order, and the
    # slowest wait several times the median (card POST p99 190 ms at p50 30 ms with 40).
    db_threads: int = Field(
        default=4, ge=1, le=200, description="threads per worker running database work"
    )
    max_overflow: int = Field(default=16, ge=0, le=500)
    # Timeouts: every wait on the database ends, and the client hears 503 + Retry-After.
    connect_timeout_s: int = Field(default=5, ge=1, le=300, description="opening a connection")
    pool_timeout_s: float = Field(default=10, gt=0, le=300, description="waiting for a pooled one")
    lock_timeout_ms: int = Field(
        default=5_000, ge=1, le=600_000, description="a row lock (Postgres)"
    )
    statement_timeout_ms: int = Field(default=15_000, ge=1, le=3_600_000, description="a statement")
    idle_in_transaction_ms: int = Field(
        default=60_000, ge=1, le=3_600_000, description="an open transaction left idle (Postgres)"
    )
    request_timeout_s: float = Field(
        default=20, gt=0, le=600, description="a request's database work, end to end"
    )
    ready_timeout_s: float = Field(
        default=2,
        ge=1,
        le=60,
        description="/readyz: its own connection and query, answered 503 past this",
    )
    write_wait_s: float = Field(
        default=10, gt=0, le=300, description="a SQLite writer waiting for its turn"
    )
    max_body_bytes: int = Field(
        default=1 << 20, ge=1024, le=1 << 30, description="largest request body (413 above)"
    )
    json_logs: bool = Field(False, description="log one JSON object per line (for collectors)")
    bank_cache_size: int = Field(default=512, ge=0, le=100_000)
    frozen_bank_fast_path: bool = Field(
        default=True,
        description="answer cached frozen-bank GETs before routing (see banks/fastpath.py)",
    )

    @field_validator("database_url")
    @classmethod
    def _driver(cls, url: str) -> str:
        # psycopg 3 is the only Postgres driver installed; accept the plain scheme operators type.
        for prefix in ("postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def grants_by_hash(self) -> dict[str, TokenGrant]:
        return {grant.token_sha256: grant for grant in self.tokens}


@lru_cache(maxsize=1)
def get_settings() -> RegistrySettings:
    return RegistrySettings()
