"""The evaluator's one settings class, read from the environment (prefix EVALUATOR_) at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.evaluator.decision import EmptyBankPolicy
from services.evaluator.design import DEFAULT_BUDGET, DEFAULT_MASK_SEED, DEFAULT_SPLIT
from shared.kit.auth import TokenGrant
from shared.kit.observability import MetricsPortSettings


class EvaluatorSettings(MetricsPortSettings):
    """Registry access, gate defaults, and how rollouts run (environment, backend, decoding)."""

    model_config = SettingsConfigDict(env_prefix="EVALUATOR_", env_file=".env", extra="ignore")

    registry_url: str = Field("http://127.0.0.1:8000", description="registry base URL")
    registry_token: SecretStr | None = Field(None, description="bearer token, evaluator role")
    tokens: list[TokenGrant] = Field(
        default_factory=list,
        description="grants of the bearer tokens this service admits (JSON list, as "
        "REGISTRY_TOKENS; in deploy/ the same list): trainer submits gates, analyst Gate A, "
        "operator evaluations; operators and readers read",
    )
    jobs_dir: Path = Field(Path("runs") / "evaluator", description="job state, records, reports")
    max_workers: int = Field(1, ge=1, le=16, description="jobs run at once (one per accelerator)")
    max_queued: int = Field(
        16, ge=1, le=10_000, description="jobs one submitter role may have waiting (429 above)"
    )
    queue_retry_after_s: int = Field(30, ge=1, le=3600, description="what a 429 says to wait")
    reap_interval_s: float = Field(
        60.0, gt=0, le=3600, description="how often open gate runs whose job is gone are closed"
    )
    json_logs: bool = Field(False, description="log one JSON object per line (for collectors)")
    max_body_bytes: int = Field(
        1 << 20, ge=1024, le=1 << 30, description="largest request body (413 above)"
    )

    protected_aliases: list[str] = Field(
        default_factory=lambda: ["production"],
        description="the registry's REGISTRY_PROTECTED_ALIASES: a gate that would move one (or "
        "a look-alike) is refused at submit, as the registry would refuse the move",
    )

    mask_seed: int = Field(DEFAULT_MASK_SEED, ge=0, le=2**62)
    budget: int = Field(DEFAULT_BUDGET, ge=1, le=64, description="K, chunks kept at most")
    split: str = Field(DEFAULT_SPLIT, description="validation split of gates")
    max_retries: int = Field(2, ge=0, le=10, description="reruns of a technically failed rollout")
    bootstrap_resamples: int = Field(10_000, ge=100, le=1_000_000)
    bootstrap_seed: int = Field(20260901)
    empty_bank: EmptyBankPolicy = Field(
        "keep", description="a complete gate that selects nothing: keep the alias, or adopt"
    )

    env_preset: str = Field("cpu", description="ShopSim preset (paper, cpu, test)")
    env_path: str | None = Field(None, description="a ShopSim world folder; overrides the preset")
    prompt_version: str | None = Field(None, description="prompt layout; None: the runtime's")
    decoding: Literal["paper", "cpu"] = "cpu"
    concurrency: int = Field(16, ge=1, le=1024, description="episodes live at once")
    max_turns: int | None = Field(None, ge=1, description="step cap below the environment's")

    backend: str = Field("transformers", description="a policy backend the agent runtime knows")
    backend_options: dict[str, Any] = Field(
        default_factory=dict, description="extra constructor options for the backend (JSON)"
    )
    device: str = "cpu"
    dtype: str = "float32"
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key: SecretStr | None = None
    load_checkpoint: bool = Field(
        False,
        description="load each job's checkpoint into the server at openai_base_url (vLLM dev "
        "mode) and refuse to roll out unless its /weight_info then names that checkpoint",
    )

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        # read at validation time, so backends the runtime gains later are accepted unchanged
        from shared.runtime.agent.backends import BACKENDS

        if name not in BACKENDS:
            raise ValueError(f"unknown backend {name!r}; the agent runtime knows {BACKENDS}")
        return name

    @model_validator(mode="after")
    def _backend_needs(self) -> EvaluatorSettings:
        if self.backend == "openai" and not (self.openai_base_url and self.openai_model):
            raise ValueError("backend openai needs EVALUATOR_OPENAI_BASE_URL and _OPENAI_MODEL")
        if self.load_checkpoint and not self.openai_base_url:
            raise ValueError("EVALUATOR_LOAD_CHECKPOINT needs EVALUATOR_OPENAI_BASE_URL")
        return self

    def registry_client(self, **options):
        """A client for the registry with this service's token (`options`: the client's
        timeout and retries)."""
        from shared.contracts.registry_api.client import RegistryClient

        if self.registry_token is None:
            raise LookupError("EVALUATOR_REGISTRY_TOKEN is not set")
        return RegistryClient(self.registry_url, self.registry_token.get_secret_value(), **options)
