"""The analyst's one settings class, read from the environment (prefix ANALYST_) at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.kit.auth import TokenGrant
from shared.kit.observability import MetricsPortSettings


class AnalystSettings(MetricsPortSettings):
    """Registry and evaluator access, how retries and live tests run, and the LLM analyst."""

    model_config = SettingsConfigDict(env_prefix="ANALYST_", env_file=".env", extra="ignore")

    registry_url: str = Field("http://127.0.0.1:8000", description="registry base URL")
    registry_token: SecretStr | None = Field(None, description="bearer token, analyst role")
    evaluator_url: str = Field("http://127.0.0.1:8100", description="evaluator (Gate A)")
    evaluator_token: SecretStr | None = Field(
        None, description="bearer token sent to the evaluator for Gate A (analyst role)"
    )
    tokens: list[TokenGrant] = Field(
        default_factory=list,
        description="grants of the bearer tokens this service admits (JSON list, as "
        "REGISTRY_TOKENS; in deploy/ the same list): trainer submits groups and compiles, "
        "operator cold starts; operators and readers read",
    )
    data_dir: Path = Field(Path("runs") / "analyst", description="groups, jobs, traces")
    max_workers: int = Field(1, ge=1, le=16, description="jobs run at once")
    max_queued: int = Field(
        16, ge=1, le=10_000, description="jobs one submitter role may have waiting (429 above)"
    )
    queue_retry_after_s: int = Field(30, ge=1, le=3600, description="what a 429 says to wait")
    max_groups_per_caller: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        description="all-wrong groups one caller (a trainer's token) may write; past it a new "
        "group is a 429 (a group is at most ~70 kB: the cap bounds what one trainer puts on disk)",
    )
    json_logs: bool = Field(False, description="log one JSON object per line (for collectors)")
    max_body_bytes: int = Field(
        1 << 20, ge=1024, le=1 << 30, description="largest request body (413 above)"
    )

    env_preset: str = Field("cpu", description="ShopSim preset when a job names none")
    env_path: str | None = Field(None, description="a ShopSim world folder; overrides presets")
    prompt_version: str | None = Field(None, description="prompt layout; None: the runtime's")
    decoding: Literal["paper", "cpu"] = "cpu"
    concurrency: int = Field(16, ge=1, le=1024, description="episodes live at once")
    max_turns: int | None = Field(None, ge=1, description="step cap below the environment's")
    device: str = "cpu"
    dtype: str = "float32"
    backend_options: dict[str, Any] = Field(default_factory=dict, description="policy options")

    verifier: Literal["policy", "analyst_model", "procedural"] = Field(
        "policy",
        description="blind agent of counterfactual trials: the frozen policy checkpoint, the "
        "llm analyst's model in a fresh agent context, or the procedural TEST DOUBLE",
    )
    verification_pairs: int = Field(
        4,
        ge=1,
        le=32,
        description="k of the paired check: continuations from a card's branch with its repair "
        "and k without it, on the same seeds; verified = >= 1 success with the repair and more "
        "with than without",
    )
    retry_attempts: int = Field(2, ge=0, le=10, description="reruns of an unscored retry")
    analyst_attempts: int = Field(2, ge=1, le=10, description="tries before ANALYST_ERROR")
    semantic_dedupe: bool = Field(True, description="MiniLM near-duplicate check in compile")

    policy_server_url: str | None = Field(
        None,
        description="an OpenAI-compatible vLLM server (dev mode, e.g. http://vllm-eval:8000/v1) "
        "that runs every job's frozen checkpoint, whatever backend the request names: the "
        "checkpoint is loaded into it first and must then be the one it serves; no model is "
        "loaded in this process (deploy/ on a GPU pool)",
    )
    policy_server_model: str = Field("policy", description="that server's served model name")
    policy_server_api_key: SecretStr | None = Field(None, description="that server's API key")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible server (llm backend)")
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_max_rounds: int = Field(20, ge=2, le=100, description="tool rounds per analysis")
    llm_repairs: int = Field(3, ge=0, le=10, description="schema repair attempts")
    llm_timeout_s: float = Field(120.0, gt=0)
    llm_max_tokens: int = Field(1024, ge=64, le=32768, description="tokens per model reply")
    llm_compiler_repairs: int = Field(2, ge=0, le=10, description="llm compiler answer repairs")

    def registry_client(self, **options):
        """A client for the registry with this service's token (`options`: the client's
        timeout and retries)."""
        from shared.contracts.registry_api.client import RegistryClient

        if self.registry_token is None:
            raise LookupError("ANALYST_REGISTRY_TOKEN is not set")
        return RegistryClient(self.registry_url, self.registry_token.get_secret_value(), **options)

    def make_env(self, preset: str | None = None):
        from shared.runtime.shopsim.env import ShopEnv

        if self.env_path:
            return ShopEnv.load(self.env_path)
        return ShopEnv.from_preset(preset or self.env_preset)

    def blind_agent(self, policy):
        """The counterfactual trials' agent: `policy` (the frozen checkpoint), the analyst's
        model served as a policy, or the procedural test double (None: the default tester)."""
        if self.verifier == "policy":
            return policy
        if self.verifier == "procedural":
            return None
        from shared.runtime.agent.backends import make_backend

        if not (self.llm_base_url and self.llm_model):
            raise LookupError(
                "ANALYST_VERIFIER=analyst_model needs ANALYST_LLM_BASE_URL and _MODEL"
            )
        key = self.llm_api_key.get_secret_value() if self.llm_api_key else None
        return make_backend("openai", self.llm_model, base_url=self.llm_base_url, api_key=key)

    def rollout_config(self):
        from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING
        from shared.runtime.agent.runner import RolloutConfig

        decoding = PAPER_DECODING if self.decoding == "paper" else CPU_DECODING
        extra = {"prompt_version": self.prompt_version} if self.prompt_version else {}
        return RolloutConfig(
            decoding=decoding, concurrency=self.concurrency, max_turns=self.max_turns, **extra
        )
