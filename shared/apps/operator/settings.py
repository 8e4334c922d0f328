"""Where the operator commands find the registry: flags first, then the environment."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class OperatorSettings(BaseSettings):
    """`INTRASKILL_REGISTRY_URL` and `INTRASKILL_REGISTRY_TOKEN` (or `.env`)."""

    model_config = SettingsConfigDict(env_prefix="INTRASKILL_", env_file=".env", extra="ignore")

    registry_url: str = Field("http://127.0.0.1:8000", description="registry base URL")
    registry_token: SecretStr | None = Field(
        None, description="bearer token; `intraskill registry serve` prints one in demo mode"
    )
