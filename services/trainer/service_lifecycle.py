"""The services a run talks to: given by URL, or started on loopback (`local_stack.py`), and
the HTTP clients the phases use. Tokens come from the environment (see `ENV_TOKENS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.trainer.config import TrainerConfig
from services.trainer.environment import TOKEN_VARIABLES, TrainerEnvironment
from services.trainer.run_context import RunError
from services.trainer.service_wait import wait_until_ready
from shared.contracts.evaluator_api.client import EvaluatorClient
from shared.contracts.registry_api.client import RegistryClient
from shared.kit.loopback import POLICY_BACKENDS, LoopbackStack

# Each a bearer token with the trainer role at that service (the operator's: see below).
ENV_TOKENS = TOKEN_VARIABLES


@dataclass(frozen=True)
class ServiceUrls:
    """Services the operator runs; a missing one is started on loopback for the run."""

    registry: str | None = None
    evaluator: str | None = None
    analyst: str | None = None
    # seconds to wait for those given by URL, the rollout servers and S_0 (see service_wait.py)
    wait_s: float = 0.0


@dataclass
class ServiceClients:
    registry: RegistryClient
    evaluator: EvaluatorClient
    analyst: Any  # shared.contracts.analyst_api.client.AnalystClient
    urls: dict[str, str]
    operator_token: str | None = None

    def close(self) -> None:
        for client in (self.registry, self.evaluator, self.analyst):
            client.close()


def start_services(
    config: TrainerConfig,
    urls: ServiceUrls,
    stack: LoopbackStack,
    say: Callable[[str], object] = print,
) -> ServiceClients:
    """Clients for the run's services, starting on loopback those without a URL; with
    `urls.wait_s`, first waits (bounded) for those given by URL and the rollout servers."""
    from shared.contracts.analyst_api.client import AnalystClient

    # Every token is checked before anything starts: a missing one would otherwise surface as a
    # 401 at the end of the first round, after its training.
    tokens = {name: service_token(name, getattr(urls, name), stack) for name in SERVICES}
    if urls.wait_s > 0:
        given = {name: getattr(urls, name) for name in SERVICES if getattr(urls, name)}
        servers = config.rollout_servers.urls
        given |= {f"vllm {index}": url for index, url in enumerate(servers)}
        wait_until_ready(given, within_s=urls.wait_s, say=say)
    registry = urls.registry or stack.start_registry().url
    evaluator = urls.evaluator or stack.start_evaluator(registry, _evaluator_settings(config)).url
    analyst = (
        urls.analyst or stack.start_analyst(registry, evaluator, _analyst_settings(config)).url
    )
    retry = {"retries": config.service_retries, "backoff": 0.5, "backoff_max": 20.0}
    return ServiceClients(
        registry=RegistryClient(registry, tokens["registry"], **retry),
        evaluator=EvaluatorClient(evaluator, token=tokens["evaluator"], **retry),
        analyst=AnalystClient(analyst, token=tokens["analyst"], **retry),
        urls={"registry": registry, "evaluator": evaluator, "analyst": analyst},
        operator_token=TrainerEnvironment().token("operator")
        or (None if urls.registry else stack.tokens()["operator"]),
    )


SERVICES = ("registry", "evaluator", "analyst")


def service_token(service: str, url: str | None, stack: LoopbackStack) -> str:
    """The trainer's bearer token for `service`: for one this run starts on loopback, the local
    stack's trainer token (the only one it admits); for one given by URL, the environment's;
    RunError when there is none."""
    if url is None:
        return stack.tokens()["trainer"]
    token = TrainerEnvironment().token(service)
    if not token:
        raise RunError(
            f"set {ENV_TOKENS[service]} (a token the {service} at {url} admits, trainer role)"
        )
    return token


def _evaluator_settings(config: TrainerConfig) -> dict[str, str]:
    return {
        "EVALUATOR_BACKEND": POLICY_BACKENDS[config.policy],
        "EVALUATOR_ENV_PRESET": config.env_preset,
        "EVALUATOR_DECODING": config.decoding,
        "EVALUATOR_DEVICE": config.device,
        "EVALUATOR_DTYPE": config.dtype,
        "EVALUATOR_BUDGET": str(config.gate.budget),
        "EVALUATOR_MASK_SEED": str(config.gate.mask_seed),
        **({"EVALUATOR_MAX_TURNS": str(config.max_turns)} if config.max_turns else {}),
    }


def _analyst_settings(config: TrainerConfig) -> dict[str, str]:
    """The real analyst acts as the run's policy acts (its retries and live tests load the
    frozen checkpoint through the backend the compile request names)."""
    return {
        "ANALYST_ENV_PRESET": config.env_preset,
        "ANALYST_DECODING": config.decoding,
        "ANALYST_DEVICE": config.device,
        "ANALYST_DTYPE": config.dtype,
        **({"ANALYST_MAX_TURNS": str(config.max_turns)} if config.max_turns else {}),
    }
