"""Where gate and evaluation rollouts come from: the agent runtime's batched engine or a double.

`RolloutRunner.run(requests, chunks)` returns one `RolloutRecord` per request, in order. The
identity recorded in each record is read back from what actually ran (the trajectory's
provenance), not copied from the request, so the pairing checks compare real runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from services.evaluator.pairing import (
    RolloutIdentity,
    RolloutRecord,
    RolloutRequest,
    decoding_fingerprint,
)
from services.evaluator.simulation import SimulatedPolicy
from shared.contracts.chunks import InjectedChunk
from shared.contracts.hashing import hash_key

EPISODE_SEED = 20260830

OnRecord = Callable[[RolloutRecord], None]


def episode_seed(task_id: str, sample: int, seed: int = EPISODE_SEED) -> int:
    """The environment seed of (task, sample): first 4 bytes of sha256("{seed}:{task}:{sample}").

    Both arms of a pair reset the environment with the same seed.
    """
    return int.from_bytes(hash_key(seed, task_id, sample)[:4], "big")


def episode_id(request: RolloutRequest) -> str:
    prefix = request.condition or "gate"
    return f"{prefix}:{request.task_id}:{request.sample}:{request.arm}:a{request.attempt}"


class RolloutRunner(Protocol):
    """Runs rollouts for the evaluator; `identity` is what its rollouts will record."""

    identity: RolloutIdentity

    def run(
        self,
        requests: Sequence[RolloutRequest],
        chunks: Mapping[str, InjectedChunk],
        on_record: OnRecord | None = None,
    ) -> list[RolloutRecord]: ...


class AgentRolloutRunner:
    """Rollouts through `shared.runtime.agent`'s batched `RolloutEngine` (any policy backend)."""

    def __init__(self, env, backend, config, *, split: str, seed: int = EPISODE_SEED) -> None:
        from shared.runtime.agent.prompts import get_layout
        from shared.runtime.agent.protocols import make_protocol
        from shared.runtime.agent.runner import RolloutConfig

        self.env, self.backend = env, backend
        self.config = config or RolloutConfig()
        self.split = split
        self.seed = seed
        layout = get_layout(self.config.prompt_version)
        self.identity = RolloutIdentity(
            checkpoint_id=backend.checkpoint_id,
            model=backend.model_id,
            decoding=decoding_fingerprint(self.config.decoding.to_dict()),
            prompt_version=layout.version,
            prompt_fingerprint=layout.fingerprint(),
            env_version=env.version,
            action_protocol=make_protocol(layout.protocol, layout.language).version,
            split=split,
        )

    def run(
        self,
        requests: Sequence[RolloutRequest],
        chunks: Mapping[str, InjectedChunk],
        on_record: OnRecord | None = None,
    ) -> list[RolloutRecord]:
        from shared.runtime.agent.runner import EpisodeSpec, RolloutEngine

        allowed = set(self.env.task_ids(self.split))
        outside = sorted({r.task_id for r in requests if r.task_id not in allowed})
        if outside:
            raise ValueError(f"tasks not in split {self.split!r}: {', '.join(outside[:5])}")
        missing = sorted({i for r in requests for i in r.included if i not in chunks})
        if missing:
            raise ValueError(f"no chunk content for {', '.join(missing)}")
        # provenance writes injected chunks as "chunk_id@version"; map them back to our ids
        reverse = {f"{c.chunk_id}@{c.version}": vid for vid, c in chunks.items()}
        specs = [
            EpisodeSpec(
                task_id=r.task_id,
                seed=episode_seed(r.task_id, r.sample, self.seed),
                chunks=tuple(chunks[vid] for vid in r.included),
                inclusion=r.inclusion,
                episode_id=episode_id(r),
            )
            for r in requests
        ]
        by_id = {episode_id(r): r for r in requests}
        records: dict[str, RolloutRecord] = {}

        def collect(trajectory) -> None:
            request = by_id[trajectory.episode_id]
            record = self._record(request, trajectory, reverse)
            records[trajectory.episode_id] = record
            if on_record is not None:
                on_record(record)

        RolloutEngine(self.env, self.backend, self.config).run(specs, collect)
        return [records[episode_id(r)] for r in requests]

    def _record(self, request: RolloutRequest, trajectory, reverse: Mapping[str, str]):
        provenance = trajectory.provenance
        identity = RolloutIdentity(
            checkpoint_id=provenance.checkpoint_id,
            model=provenance.model_id,
            decoding=decoding_fingerprint(provenance.decoding),
            prompt_version=provenance.prompt_version,
            prompt_fingerprint=provenance.prompt_fingerprint,
            env_version=provenance.env_version,
            action_protocol=provenance.action_protocol,
            split=self.split,
        )
        counts = trajectory.token_counts
        return RolloutRecord(
            task_id=request.task_id,
            sample=request.sample,
            arm=request.arm,
            attempt=request.attempt,
            status="completed" if trajectory.scored else "failed",
            identity=identity,
            components=dict(trajectory.components),
            injected=tuple(reverse.get(item, item) for item in provenance.injected),
            inclusion=None if provenance.inclusion is None else tuple(provenance.inclusion),
            steps=len(trajectory.steps),
            protocol_errors=trajectory.protocol_errors,
            generated_tokens=int(counts.get("generated_tokens", 0)),
            prompt_tokens=int(counts.get("prompt_tokens", 0)),
            termination=trajectory.termination,
            error=trajectory.error,
            episode_id=trajectory.episode_id,
            condition=request.condition,
        )


class SimulatedRolloutRunner:
    """TEST DOUBLE of the rollout path: outcomes from a `SimulatedPolicy`, no model, no shop.

    `fail` decides which attempts fail technically (to exercise retries and unpaired tasks);
    `identity` is what every record carries, so a test can make one arm disagree.
    """

    def __init__(
        self,
        policy: SimulatedPolicy,
        identity: RolloutIdentity,
        *,
        fail: Callable[[RolloutRequest], bool] | None = None,
        identity_for: Callable[[RolloutRequest], RolloutIdentity] | None = None,
    ) -> None:
        self.policy = policy
        self.identity = identity
        self.fail = fail or (lambda _request: False)
        self.identity_for = identity_for or (lambda _request: identity)
        self.calls: list[list[RolloutRequest]] = []

    def run(
        self,
        requests: Sequence[RolloutRequest],
        chunks: Mapping[str, InjectedChunk],
        on_record: OnRecord | None = None,
    ) -> list[RolloutRecord]:
        self.calls.append(list(requests))
        records = []
        for request in requests:
            failed = self.fail(request)
            components = (
                dict.fromkeys(self.policy.components(request.task_id, ()), 0.0)
                if failed
                else self.policy.components(
                    request.task_id,
                    request.included,
                    sample=request.sample,
                    arm=f"{request.condition}{request.arm}",
                )
            )
            record = RolloutRecord(
                task_id=request.task_id,
                sample=request.sample,
                arm=request.arm,
                attempt=request.attempt,
                status="failed" if failed else "completed",
                identity=self.identity_for(request),
                components=components,
                injected=request.included,
                inclusion=request.inclusion,
                steps=5 + len(request.included),
                protocol_errors=0,
                generated_tokens=100 * (5 + len(request.included)),
                termination=None if failed else "purchase",
                error="simulated technical failure" if failed else None,
                episode_id=episode_id(request),
                condition=request.condition,
            )
            records.append(record)
            if on_record is not None:
                on_record(record)
        return records
