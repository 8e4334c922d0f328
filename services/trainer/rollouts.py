"""Where a rollout step's episodes come from: the agent runtime, or the simulated TEST DOUBLE.

* `EngineRollouts`: the runtime's `RolloutEngine` on ShopSim with a policy backend (the trainer's
  own weights through the transformers backend, or the procedural test-double agent).
* `SimulatedRollouts`: a TEST DOUBLE of the policy for fast runs of the whole loop. No model
  generates and no environment steps: each episode's success is a hash-seeded Bernoulli draw
  whose probability depends on the task and on the chunks in the prompt (known effects, the same
  ones the `simulated` backend uses in gates), and its tokens are short hash-seeded sequences of
  the tiny model's vocabulary. Everything downstream is real: treatments, consistency check,
  filter, advantages, the loss and the update on those token tensors, registry, gates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from shared.contracts.chunks import RENDERER_VERSION
from shared.contracts.hashing import hash_key, hash_uniform
from shared.runtime.agent.backends.simulated import SimulatedPolicyModel
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
from shared.runtime.agent.trajectory import Provenance, Segment, Trajectory, zero_components

SIMULATED_TRAIN_TASKS = 3726  # the paper's train split size


class RolloutSource(Protocol):
    """Runs episode specs to trajectories (one per spec, in order)."""

    name: str
    checkpoint_id: str

    def train_task_ids(self) -> list[str]: ...

    def run(self, specs: Sequence[EpisodeSpec]) -> list[Trajectory]: ...

    def weights_changed(self, checkpoint_id: str) -> None:
        """The policy's weights moved: forget state computed with the old ones."""
        ...


class EngineRollouts:
    """Episodes through the agent runtime on a ShopSim world.

    A backend without token ids (the procedural TEST DOUBLE) gets test-double segments from
    `tokenizer`, so its episodes still train the policy's tensors (see `test_double_segment`).
    """

    name = "engine"

    def __init__(
        self, env, backend, config: RolloutConfig, *, split: str = "train", tokenizer=None
    ) -> None:
        self.env, self.backend, self.config, self.split = env, backend, config, split
        self.engine = RolloutEngine(env, backend, config)
        self.tokenizer = tokenizer

    @property
    def checkpoint_id(self) -> str:
        return self.backend.checkpoint_id

    def train_task_ids(self) -> list[str]:
        return list(self.env.task_ids(self.split))

    def run(self, specs: Sequence[EpisodeSpec]) -> list[Trajectory]:
        trajectories = self.engine.run(specs)
        if self.tokenizer is None:
            return trajectories
        return [
            t if t.exact_tokens or not t.scored else test_double_segment(t, self.tokenizer)
            for t in trajectories
        ]

    def weights_changed(self, checkpoint_id: str) -> None:
        # stored KV caches were computed by the old weights
        clear = getattr(self.backend, "clear_cache", None)
        if clear is not None:
            clear()
        self.backend.checkpoint_id = checkpoint_id


class SimulatedRollouts:
    """TEST DOUBLE of the policy: hash-seeded outcomes on short real token sequences."""

    name = "simulated"

    def __init__(
        self,
        outcomes: SimulatedPolicyModel,
        *,
        vocab_size: int,
        prompt_tokens: int,
        generated_tokens: int,
        technical_failure_rate: float,
        checkpoint_id: str,
        model_id: str = "simulated-test-double",
    ) -> None:
        self.outcomes = outcomes
        self.vocab_size = vocab_size
        self.prompt_tokens, self.generated_tokens = prompt_tokens, generated_tokens
        self.technical_failure_rate = technical_failure_rate
        self.checkpoint_id, self.model_id = checkpoint_id, model_id

    def train_task_ids(self) -> list[str]:
        return [f"sim-train-{index:05d}" for index in range(SIMULATED_TRAIN_TASKS)]

    def weights_changed(self, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id

    def _tokens(self, count: int, *key: object) -> list[int]:
        # ids from 3 up: low ids are the tiny tokenizer's special tokens
        return [3 + int(hash_uniform(*key, i) * (self.vocab_size - 3)) for i in range(count)]

    def run(self, specs: Sequence[EpisodeSpec]) -> list[Trajectory]:
        return [self._episode(spec) for spec in specs]

    def _episode(self, spec: EpisodeSpec) -> Trajectory:
        episode_id = spec.resolved_id()
        injected = [f"{chunk.chunk_id}@{chunk.version}" for chunk in spec.chunks]
        provenance = Provenance(
            backend="simulated",
            model_id=self.model_id,
            checkpoint_id=self.checkpoint_id,
            bank_id=spec.bank_id,
            bank_hash=spec.bank_hash,
            inclusion=list(spec.inclusion) if spec.inclusion is not None else None,
            injected=injected,
            skill_block_hash=hash_key(*injected).hex() if injected else None,
            prompt_version="simulated",
            prompt_fingerprint="simulated",
            action_protocol="simulated",
            skill_renderer=RENDERER_VERSION,
            env_version="simulated",
            decoding={},
            seed=spec.seed,
        )
        key = (self.outcomes.seed, "episode", self.checkpoint_id, episode_id)
        if hash_uniform(*key, "technical") < self.technical_failure_rate:
            return Trajectory(
                episode_id=episode_id,
                group_id=spec.group_id,
                task_id=spec.task_id,
                provenance=provenance,
                scored=False,
                termination=None,
                error="simulated technical failure (test double)",
                reward=0.0,
                components=zero_components(),
                steps=[],
                exact_tokens=False,
            )
        probability = self.outcomes.success_probability(spec.task_id, injected)
        success = hash_uniform(*key, "success") < probability
        components = dict.fromkeys(zero_components(), 1.0 if success else 0.0)
        prompt = self._tokens(self.prompt_tokens, "prompt", spec.task_id, *injected)
        generated = self._tokens(self.generated_tokens, *key, "generated")
        uniform = -math.log(self.vocab_size)  # the double samples uniformly
        segment = Segment(
            turns=[0],
            token_ids=prompt + generated,
            loss_mask=[0] * len(prompt) + [1] * len(generated),
            logprobs=[0.0] * len(prompt) + [uniform] * len(generated),
        )
        return Trajectory(
            episode_id=episode_id,
            group_id=spec.group_id,
            task_id=spec.task_id,
            provenance=provenance,
            scored=True,
            termination="purchase",
            reward=components["r_strict"],
            components=components,
            steps=[],
            segments=[segment],
            exact_tokens=True,
            token_counts={"prompt_tokens": len(prompt), "generated_tokens": len(generated)},
        )


def test_double_segment(
    trajectory: Trajectory, tokenizer, *, prompt_limit: int = 256, feedback_limit: int = 64
) -> Trajectory:
    """TEST DOUBLE tokens for an episode whose backend sent none: the first observation, then
    each reply (loss mask 1, uniform sampling log-prob) and a cut of what followed it (mask 0).

    These are not the tokens any model sampled; they exist so that a test-double policy's
    episodes run through the same loss and update as a model's.
    """
    vocab = len(tokenizer)
    uniform = -math.log(vocab)
    ids = tokenizer.encode(trajectory.initial_observation)[:prompt_limit] or [0]
    mask, logprobs = [0] * len(ids), [0.0] * len(ids)
    for step in trajectory.steps:
        reply = tokenizer.encode(step.reply)[:64] or [0]
        feedback = tokenizer.encode(step.observation or "")[:feedback_limit]
        ids += reply + feedback
        mask += [1] * len(reply) + [0] * len(feedback)
        logprobs += [uniform] * len(reply) + [0.0] * len(feedback)
    segment = Segment(
        turns=[s.turn for s in trajectory.steps] or [0],
        token_ids=ids,
        loss_mask=mask,
        logprobs=logprobs,
    )
    return trajectory.model_copy(update={"segments": [segment], "exact_tokens": True})
