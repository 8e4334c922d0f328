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
    from shared.runtime.shopsim.env import ShopEnv

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
    from shared.runtime.agent.backends import make_backend as runtime_backend

    options = dict(settings.backend_options)
    if settings.backend == "openai":
        return runtime_backend(
            "openai",
            settings.openai_model,  # type: ignore[arg-type]
            base_url=settings.openai_base_url,
            checkpoint_id=checkpoint_id,
            api_key=api_key(settings),
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
    from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING
    from shared.runtime.agent.runner import RolloutConfig

    decoding = PAPER_DECODING if settings.decoding == "paper" else CPU_DECODING
    extra = {"prompt_version": settings.prompt_version} if settings.prompt_version else {}
    return RolloutConfig(
        decoding=decoding, concurrency=settings.concurrency, max_turns=settings.max_turns, **extra
    )


def agent_runner_factory(settings: EvaluatorSettings) -> RunnerFactory:
    """Runners through the agent runtime's batched engine, one backend per checkpoint; with
    `load_checkpoint`, on a server that was made to serve that checkpoint first."""

    def factory(checkpoint_id: str, uri: str | None, split: str) -> RolloutRunner:
        server = load_checkpoint(settings, checkpoint_id, uri) if settings.load_checkpoint else None
        backend = make_backend(settings, checkpoint_id, uri)
        runner = AgentRolloutRunner(
            make_env(settings), backend, rollout_config(settings), split=split
        )
        if server is None:
            return runner
        return PinnedServerRunner(runner, server, checkpoint_id, api_key(settings))

    return factory


def load_checkpoint(settings: EvaluatorSettings, checkpoint_id: str, uri: str | None) -> str:
    """Load the checkpoint's weights (its registry uri: a folder the server mounts at the same
    path) into the policy server; returns the server's root. Raises unless it then serves them."""
    import httpx

    from shared.runtime.vllm_weights import load_weights, server_client, server_root

    if not uri:
        raise LookupError(f"checkpoint {checkpoint_id!r} has no weights uri to load")
    root = server_root(settings.openai_base_url)  # type: ignore[arg-type]
    timeout = httpx.Timeout(LOAD_TIMEOUT_S, connect=10.0)
    with server_client(api_key(settings), timeout) as client:
        load_weights(client, root, uri.removeprefix("file://"), checkpoint_id)
    return root


def api_key(settings: EvaluatorSettings) -> str | None:
    """The policy server's API key (EVALUATOR_OPENAI_API_KEY), sent on every call to it."""
    return settings.openai_api_key.get_secret_value() if settings.openai_api_key else None


# Reloading a 4B model from a network volume takes minutes; a gate can wait that long once.
LOAD_TIMEOUT_S = 1800.0


class PinnedServerRunner:
    """A runner whose server must serve one checkpoint: checked before and after every batch,
    so a server that restarted (back on its start-up weights) mid-gate fails the job instead
    of mixing two checkpoints in one gate's pairs."""

    def __init__(
        self, runner: RolloutRunner, root: str, checkpoint_id: str, api_key: str | None = None
    ) -> None:
        self.runner, self.root, self.checkpoint_id = runner, root, checkpoint_id
        self.api_key = api_key
        self.identity = runner.identity

    def check(self) -> None:
        from shared.runtime.vllm_weights import require_version, server_client

        with server_client(self.api_key, 30.0) as client:
            require_version(client, self.root, self.checkpoint_id)

    def run(self, requests, chunks, on_record=None):
        self.check()
        records = self.runner.run(requests, chunks, on_record)
        self.check()
        return records
