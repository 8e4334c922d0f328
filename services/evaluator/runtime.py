"""Building the rollout path from settings: ShopSim environment, policy backend, runner.

Heavy imports (torch, transformers) happen only here and only when a job needs them.
"""

from __future__ import annotations

from collections.abc import Callable

from services.evaluator.rollouts import AgentRolloutRunner, RolloutRunner
from services.evaluator.settings import EvaluatorSettings

# (checkpoint id, weights uri or None, split) -> runner
RunnerFactory = Callable[[str, str | None, str], RolloutRunner]


def make_env(settings: EvaluatorSettings):
    from shared.shopsim.env import ShopEnv

    if settings.env_path:
        return ShopEnv.load(settings.env_path)
    return ShopEnv.from_preset(settings.env_preset)


# backends that load a checkpoint's weights in process, so need its registry uri
WEIGHT_BACKENDS = ("transformers", "vllm")


def make_backend(settings: EvaluatorSettings, checkpoint_id: str, uri: str | None):
    """The policy backend serving `checkpoint_id`, through the agent runtime's factory.

    In-process backends (transformers, vllm) load the checkpoint's weights from its registry
    uri (a local folder, optionally `file://`); openai talks to a server already serving it.
    Any other backend the runtime knows (its test doubles, say) gets the uri's path when there
    is one, else the checkpoint id, as its model; `backend_options` go to every backend.
    """
    from shared.agent.backends import make_backend as runtime_backend

    options = dict(settings.backend_options)
    if settings.backend == "openai":
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return runtime_backend(
            "openai",
            settings.openai_model,  # type: ignore[arg-type]
            base_url=settings.openai_base_url,
            checkpoint_id=checkpoint_id,
            api_key=key,
            concurrency=settings.concurrency,
            **options,
        )
    if not uri and settings.backend in WEIGHT_BACKENDS:
        raise LookupError(f"checkpoint {checkpoint_id!r} has no weights uri")
    model = uri.removeprefix("file://") if uri else checkpoint_id
    if settings.backend == "transformers":
        options = {"device": settings.device, "dtype": settings.dtype, **options}
    return runtime_backend(settings.backend, model, checkpoint_id=checkpoint_id, **options)


def rollout_config(settings: EvaluatorSettings):
    from shared.agent.decoding import CPU_DECODING, PAPER_DECODING
    from shared.agent.runner import RolloutConfig

    decoding = PAPER_DECODING if settings.decoding == "paper" else CPU_DECODING
    extra = {"prompt_version": settings.prompt_version} if settings.prompt_version else {}
    return RolloutConfig(
        decoding=decoding, concurrency=settings.concurrency, max_turns=settings.max_turns, **extra
    )


def agent_runner_factory(settings: EvaluatorSettings) -> RunnerFactory:
    """Runners through the agent runtime's batched engine, one backend per checkpoint."""

    def factory(checkpoint_id: str, uri: str | None, split: str) -> RolloutRunner:
        backend = make_backend(settings, checkpoint_id, uri)
        return AgentRolloutRunner(
            make_env(settings), backend, rollout_config(settings), split=split
        )

    return factory
