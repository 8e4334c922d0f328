"""The policy a run trains and where its rollouts come from.

A fresh run loads the base weights (or the warm start's); a resumed one loads the last
checkpoint's weights and optimizer state. The KL reference is always the initial model (the base
weights), across resumes. The test-double policies (simulated, procedural) train real tensors of
the tiny model whatever the preset names.

Under ranks the leader alone runs this module's `load_policy`; `Policy`'s methods announce each
collective, and every other rank runs `follow_the_leader`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from services.trainer.config import TrainerConfig
from services.trainer.distributed import LeaderFailed, next_command
from services.trainer.policy import Policy
from services.trainer.rollouts import RolloutSource
from services.trainer.run_context import RunContext, RunState


def policy_config(config: TrainerConfig) -> TrainerConfig:
    """The config the policy trains with: test doubles train the tiny model in fp32, on a GPU
    when there is one."""
    if config.policy == "model":
        return config
    import torch

    device = config.device if torch.cuda.is_available() else "cpu"
    return config.with_(dtype="float32", device=device)


def load_policy(context: RunContext, state: RunState) -> tuple[Policy, RolloutSource]:
    """The policy at the run's last checkpoint (or its base weights), and its rollout source."""
    from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING

    config = policy_config(context.config)
    decoding = PAPER_DECODING if config.decoding == "paper" else CPU_DECODING
    folder = state.checkpoint_dir
    initial = base_weights(context) if config.kl_coef > 0 or not folder else None
    path = Path(folder) if folder else initial
    policy = Policy.load(path, config, decoding.temperature, reference_path=initial)
    if folder:
        policy.load_optimizer(Path(folder))
    version = f"{context.run_id}-s{state.step}"
    return policy, make_source(context, policy, decoding, version)


def follow_the_leader() -> None:
    """A follower rank's whole run: join each collective the leader announces, until it stops."""
    policy = None
    command, args = next_command()
    while command != "stop":
        try:
            if command == "load":
                policy = Policy.load(*args)
            else:
                getattr(policy, command)(*args)
        except LeaderFailed as failure:  # the leader raises too; its next call is `stop`
            print(f"rank follower: {failure}", file=sys.stderr)
        command, args = next_command()


def base_weights(context: RunContext) -> Path:
    from shared.runtime.agent.models import resolve_model

    config = context.config
    if config.policy != "model":
        return resolve_model("tiny")
    if config.warm_start.enabled:  # SFT first (cached by fingerprint): see warm_start/
        from services.trainer.warm_start import WarmStartPlan, warm_start

        result = warm_start(WarmStartPlan.from_trainer_config(config))
        context.record.data["warm_start"] = {
            "path": str(result.path),
            "fingerprint": result.fingerprint,
            "cached": result.cached,
            "summary": result.summary,
        }
        context.record.save()
        return result.path
    return resolve_model(config.model)


def make_source(context: RunContext, policy: Policy, decoding: Any, version: str) -> RolloutSource:
    from services.trainer.rollouts import EngineRollouts, SimulatedRollouts

    config = context.config
    if config.policy == "simulated":
        return SimulatedRollouts(
            simulated_model(config),
            vocab_size=policy.sampling_model.get_input_embeddings().weight.shape[0],
            prompt_tokens=config.simulated.prompt_tokens,
            generated_tokens=config.simulated.generated_tokens,
            technical_failure_rate=config.simulated.technical_failure_rate,
            checkpoint_id=version,
        )
    from shared.runtime.agent.runner import RolloutConfig
    from shared.runtime.shopsim.env import ShopEnv

    rollout = RolloutConfig(
        decoding=decoding,
        concurrency=config.concurrency,
        max_turns=config.max_turns,
        **({"prompt_version": config.prompt_version} if config.prompt_version else {}),
    )
    env = ShopEnv.from_preset(config.env_preset)
    if config.rollout_servers.urls:  # vLLM servers sample; they get `version` pushed first
        from services.trainer.weight_sync import server_rollouts

        return server_rollouts(
            config.rollout_servers,
            env,
            rollout,
            policy,
            context.out / "weights",
            version,
            split=config.split,
        )
    if config.policy == "procedural":
        from shared.runtime.agent.backends import make_backend

        backend = make_backend("procedural", "procedural", checkpoint_id=version)
    else:
        from shared.runtime.agent.backends.transformers_backend import TransformersBackend

        backend = TransformersBackend(
            policy.sampling_model, policy.tokenizer, model_id=config.model, checkpoint_id=version
        )
    test_double = config.policy == "procedural"
    return EngineRollouts(
        env,
        backend,
        rollout,
        split=config.split,
        tokenizer=policy.tokenizer if test_double else None,
    )


def simulated_model(config: Any) -> Any:
    """The simulated TEST DOUBLE policy's known effects (the gate's simulated backend reads the
    same file from each checkpoint)."""
    from shared.runtime.agent.backends.simulated import SimulatedPolicyModel

    sim = config.simulated
    return SimulatedPolicyModel(
        seed=config.seed,
        base_success=tuple(sim.base_success),  # type: ignore[arg-type]
        chunk_effect=sim.chunk_effect,
        env_preset=config.env_preset,
    )
