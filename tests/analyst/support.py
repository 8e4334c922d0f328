"""Shared builders for the analyst tests (imported as tests.analyst.support)."""

from __future__ import annotations

import functools

from services.analyst.counterfactual_trials import PairedVerification, Trial
from services.analyst.mechanisms import LIBRARY
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import BankEntryPublic
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.runtime.shopsim.env import ShopEnv


@functools.cache
def small_env() -> ShopEnv:
    return ShopEnv.from_preset("test")


def entry(chunk_id: int, content: ChunkContent, *, slug: str | None = None) -> BankEntryPublic:
    """An active bank entry as the registry returns it."""
    return BankEntryPublic(
        position=chunk_id,
        chunk_id=chunk_id,
        slug=slug or f"chunk-{chunk_id}",
        version=1,
        chunk_version_id=100 + chunk_id,
        rho=0.5,
        coefficient=0.1,
        content_hash=content.content_hash(),
        content=content,
    )


def library_bank(*keys: str) -> list[BankEntryPublic]:
    return [entry(i + 1, LIBRARY[key].template) for i, key in enumerate(keys)]


def failed_traces(env, bank_chunks=(), *, split="train", n=40, seed=0, slip=0.0):
    """Procedural (test double) episodes that failed, with the given injected chunks."""
    policy = make_backend("procedural", "test-double", slip=slip)
    specs = [
        EpisodeSpec(task_id=task, seed=seed + i, chunks=tuple(bank_chunks))
        for i, task in enumerate(env.task_ids(split)[:n])
    ]
    trajectories = run_episodes(env, policy, specs, RolloutConfig(concurrency=20))
    return [t for t in trajectories if t.scored and t.components["r_success"] == 0.0]


def succeeds_with(env, trace, chunks) -> bool:
    """Whether the procedural test double (slip 0), starting fresh on the trace's task with
    `chunks` in its prompt, reaches R_success = 1: an expectation computed with the agent
    runtime alone, not with the analyst code under test."""
    policy = make_backend("procedural", "expectation", slip=0.0)
    spec = EpisodeSpec(task_id=trace.task_id, seed=0, chunks=tuple(chunks))
    (trajectory,) = run_episodes(env, policy, [spec], RolloutConfig(concurrency=1))
    return trajectory.scored and trajectory.components["r_success"] == 1.0


def paired(with_card, without_card, *, valid_actions=3) -> PairedVerification:
    """A paired check with these successes per seed (with the card, without it), as records."""

    def trials(arm, outcomes):
        record = {"branch_step": 0, "prompt_hash": None, "prompt_faithful": True,
                  "agent": "procedural-test-double:record", "replay_faithful": True,
                  "termination": "purchase", "valid_actions": valid_actions,
                  "steps": 4}  # fmt: skip
        return tuple(
            Trial(arm=arm, seed=seed, reward=float(success), success=success, **record)
            for seed, success in enumerate(outcomes)
        )

    return PairedVerification(
        branch_step=0, turn_budget=None, seeds=tuple(range(len(with_card))),
        with_trials=trials("with", with_card), without_trials=trials("without", without_card),
    )  # fmt: skip
