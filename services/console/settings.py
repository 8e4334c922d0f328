"""The console's one settings class, read from the environment (prefix CONSOLE_) at start."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.kit.observability import MetricsPortSettings


class ConsoleSettings(MetricsPortSettings):
    """Where the registry and evaluator answer, and how long a login lasts."""

    model_config = SettingsConfigDict(env_prefix="CONSOLE_", env_file=".env", extra="ignore")

    registry_url: str = Field("http://127.0.0.1:8000", description="registry base URL")
    evaluator_url: str | None = Field(
        None, description="evaluator base URL; its gate jobs are linked as evidence (read-only)"
    )
    traces_dir: Path | None = Field(
        None, description="trajectory files (the analyst's retry traces) episode replay may read"
    )
    session_ttl_s: int = Field(8 * 3600, ge=60, le=7 * 24 * 3600, description="login lifetime")
    max_sessions: int = Field(1000, ge=1, description="logins held at once (oldest dropped)")
    max_sessions_per_user: int = Field(
        5, ge=1, description="logins one registry user holds at once (their oldest dropped)"
    )
    logins_per_minute: int = Field(
        20, ge=1, description="logins one registry user may open per minute (then 429)"
    )
    cookie_secure: bool | None = Field(
        None, description="Secure cookie flag; unset: on when the request came over https"
    )
    registry_timeout_s: float = Field(10.0, gt=0, description="per registry call")


@cache
def get_settings() -> ConsoleSettings:
    return ConsoleSettings()
