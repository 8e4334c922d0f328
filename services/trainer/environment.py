"""What the trainer reads from its process environment, in one place: the bearer tokens of
services it did not start (Kubernetes Secrets), the vLLM servers' API key, and what a launcher
set for this process (its rank, FSDP). Everything else comes from the TOML config.

Read when asked (`TrainerEnvironment()`), never cached: launchers and tests set these per
process. An empty value counts as unset."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SERVICES_WITH_TOKENS = ("registry", "evaluator", "analyst", "operator")
# the variable holding the trainer's token for each service (the operator's: only the no-gate
# ablation writes banks itself)
TOKEN_VARIABLES = {service: f"TRAINER_{service.upper()}_TOKEN" for service in SERVICES_WITH_TOKENS}


class TrainerEnvironment(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    registry_token: str | None = Field(None, validation_alias=TOKEN_VARIABLES["registry"])
    evaluator_token: str | None = Field(None, validation_alias=TOKEN_VARIABLES["evaluator"])
    analyst_token: str | None = Field(None, validation_alias=TOKEN_VARIABLES["analyst"])
    operator_token: str | None = Field(None, validation_alias=TOKEN_VARIABLES["operator"])
    # the servers' --api-key (deploy/: the vllm-api-key Secret)
    vllm_api_key: str | None = Field(None, validation_alias="TRAINER_VLLM_API_KEY")
    # set by torchrun / accelerate on every rank before any process group exists
    rank: int = Field(0, ge=0, validation_alias="RANK")
    # `accelerate launch` with an FSDP config; read before any model is prepared
    accelerate_use_fsdp: bool = Field(False, validation_alias="ACCELERATE_USE_FSDP")

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object, info) -> object:
        if value == "":
            return cls.model_fields[info.field_name].default
        return value

    def token(self, service: str) -> str | None:
        """The trainer's token for `service` (one of SERVICES_WITH_TOKENS), None when unset."""
        return getattr(self, f"{service}_token")

    @property
    def main_process(self) -> bool:
        """Rank 0, or no launcher at all: the one process that serves and writes."""
        return self.rank == 0
