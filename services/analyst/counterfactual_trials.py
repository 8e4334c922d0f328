"""Paired counterfactual verification: does a card's own repair turn the failed full-skill
retry into a terminal success more often than the retry's own prompt does? Blind to gold.

One continuation (the method's "replays the full-skill trace, locates the earliest causal
branch, proposes the smallest observable repair, and tests that repair in the environment"):

1. The failed retry is replayed: its recorded replies answer every turn before the earliest
   causal branch. ShopSim pages are a deterministic function of the actions, so the replay
   meets the retry's own pages; the continuation checks that it did (`replay_faithful`).
2. From the branch on, a blind agent acts. It sees what any policy sees (the visible task,
   the persona document, the pages) and a prompt whose skill block is either the frozen bank
   with the card's own deployable chunk added (ADD) or put in place of its target (REWRITE):
   arm "with"; or the frozen bank as the retry carried it: arm "without". It never sees gold.
   The continuation has its own turn budget: the rollout's turn cap counts from the branch.
3. The environment scores the episode: only R_success = 1 is a success.

A card is verified by k continuations per arm, pairwise on the same seeds (the same episode
id and seed, so the same per-turn sampling seeds): at least one success with the repair and
strictly more with it than without. An agent that succeeds on its own from the branch, or a
hollow card it ignores, cannot pass.

The blind agent is a `PolicyBackend`: the round's frozen policy checkpoint (the default), the
analyst model served as a policy in a fresh context, or the `procedural` TEST DOUBLE standing
in for a policy (see docs/analyst.md, "Counterfactual verification").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.contracts.hashing import content_hash
from shared.contracts.registry_api.schemas import BankEntryPublic
from shared.runtime.agent.backends.base import PolicyBackend, TurnOutput, TurnRequest
from shared.runtime.agent.backends.procedural import ProceduralPolicy, action_output
from shared.runtime.agent.prompts import get_layout
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.runtime.agent.trajectory import StepRecord, Trajectory
from shared.runtime.shopsim.types import Environment

PROPOSAL_SLUG = "card-proposal"
Arm = Literal["with", "without"]


@dataclass(frozen=True)
class Trial:
    """One counterfactual continuation: its arm, where it branched, what prompt and agent, and
    the verdict."""

    arm: Arm
    branch_step: int  # turns replayed from the failed retry before the blind agent acts
    prompt_hash: str | None  # hash of the continuation's skill block
    prompt_faithful: bool  # that hash is the arm's block (with: the bank with the card)
    agent: str  # the blind agent's model id
    seed: int
    replay_faithful: bool  # the replayed turns met the retry's own pages
    reward: float
    success: bool  # R_success = 1, scored, faithful replay, the arm's prompt
    termination: str | None
    valid_actions: int  # by the blind agent, after the branch
    steps: int
    trajectory: Trajectory | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record.pop("trajectory")
        return record


def default_tester() -> PolicyBackend:
    """The procedural TEST DOUBLE as a blind agent (it follows the chunks it recognises)."""
    return ProceduralPolicy("live-tester", slip=0.0)


def bank_chunks(bank: Sequence[BankEntryPublic]) -> list[InjectedChunk]:
    """The frozen bank's chunks as the retry's prompt carried them."""
    return [InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in bank]


def repaired_bank(
    bank: Sequence[BankEntryPublic], content: ChunkContent, target_chunk_id: int | None
) -> list[InjectedChunk]:
    """The frozen bank with the card's chunk added at the end (ADD) or in its target's slot
    (REWRITE): the retry's prompt with one intervention."""
    chunks = []
    for entry in bank:
        if entry.chunk_id == target_chunk_id:
            chunks.append(InjectedChunk(chunk_id=entry.slug, version=entry.version + 1,
                                        content=content))  # fmt: skip
        else:
            chunks.append(
                InjectedChunk(chunk_id=entry.slug, version=entry.version, content=entry.content)
            )
    if target_chunk_id is None:
        chunks.append(InjectedChunk(chunk_id=PROPOSAL_SLUG, version=1, content=content))
    return chunks


class ReplayThenAct:
    """A `PolicyBackend` that answers an episode's first turns with the failed retry's
    recorded replies, then hands every later turn to the blind agent."""

    stream = None  # the runner must call `generate`, which decides who answers each turn

    def __init__(self, agent: PolicyBackend, replayed: Sequence[StepRecord]) -> None:
        self.agent, self.replayed = agent, list(replayed)

    def __getattr__(self, name: str) -> Any:  # name, model_id, renderer, ... are the agent's
        return getattr(self.agent, name)

    def generate(self, requests: Sequence[TurnRequest], decoding) -> list:
        outputs: list[Any] = [None] * len(requests)
        asking = []
        for index, request in enumerate(requests):
            turn = sum(message.get("role") == "assistant" for message in request.messages)
            if turn < len(self.replayed):
                outputs[index] = _recorded(self.replayed[turn], tools=request.tools is not None)
            else:
                asking.append(index)
        if asking:
            answers = self.agent.generate([requests[i] for i in asking], decoding)
            for index, answer in zip(asking, answers, strict=True):
                outputs[index] = answer
        return outputs

    def release(self, key: str) -> None:
        self.agent.release(key)


def _recorded(step: StepRecord, *, tools: bool) -> TurnOutput:
    """A recorded turn as the protocol reads it: its action, or its refused reply verbatim."""
    if step.action is not None and step.protocol_error is None:
        return action_output(step.action, tools=tools)
    return TurnOutput(text=step.reply, finish_reason=step.finish_reason,
                      assistant_message={"role": "assistant", "content": step.reply})  # fmt: skip


def skill_block_hash(chunks: Sequence[InjectedChunk], prompt_version: str) -> str | None:
    """The hash a prompt of this layout carrying exactly `chunks` records (None: no block)."""
    layout = get_layout(prompt_version)
    block = render_skill_block(chunks, header=layout.skill_header, caveat=layout.skill_caveat)
    return content_hash(block) if block else None


def continuation_config(config: RolloutConfig, branch: int, episodes: int) -> RolloutConfig:
    """The continuations' rollout: all `episodes` at once, and the turn cap counted from the
    branch (replayed turns do not use up the blind agent's budget). With no cap of its own the
    environment's step ceiling bounds the whole episode, replayed turns included."""
    cap = config.max_turns + branch if config.max_turns is not None else None
    return replace(config, max_turns=cap, concurrency=max(1, episodes))


def continuations(
    env: Environment,
    retry: Trajectory,
    chunks: Sequence[InjectedChunk],
    *,
    arm: Arm,
    branch_step: int,
    agent: PolicyBackend,
    seeds: Sequence[int],
    config: RolloutConfig | None = None,
) -> list[Trial]:
    """Replay `retry` up to `branch_step`, then let `agent` finish with `chunks` in its prompt,
    once per seed. The episode id depends on the branch and seed only, so the other arm's
    continuation on a seed draws the same sampling seeds."""
    branch = max(0, min(branch_step, len(retry.steps)))
    config = continuation_config(config or RolloutConfig(), branch, len(seeds))
    specs = [
        EpisodeSpec(
            task_id=retry.task_id,
            seed=seed,
            chunks=tuple(chunks),
            episode_id=f"{retry.episode_id}-counterfactual-{branch}-{seed}",
        )
        for seed in seeds
    ]
    trajectories = run_episodes(env, ReplayThenAct(agent, retry.steps[:branch]), specs, config)
    expected = skill_block_hash(chunks, config.prompt_version)
    return [
        _trial(trajectory, retry, arm=arm, branch=branch, expected=expected, agent=agent, seed=s)
        for trajectory, s in zip(trajectories, seeds, strict=True)
    ]


def _trial(trajectory, retry, *, arm, branch, expected, agent, seed) -> Trial:
    faithful = len(trajectory.steps) >= branch and all(
        replayed.action == recorded.action and replayed.observation == recorded.observation
        for replayed, recorded in zip(trajectory.steps[:branch], retry.steps[:branch], strict=True)
    )
    prompt_faithful = trajectory.provenance.skill_block_hash == expected
    reached = trajectory.scored and trajectory.components.get("r_success") == 1.0
    return Trial(
        arm=arm,
        branch_step=branch,
        prompt_hash=trajectory.provenance.skill_block_hash,
        prompt_faithful=prompt_faithful,
        agent=agent.model_id,
        seed=seed,
        replay_faithful=faithful,
        reward=trajectory.reward,
        success=bool(reached and faithful and prompt_faithful),
        termination=trajectory.termination,
        valid_actions=sum(
            step.action is not None and step.protocol_error is None
            for step in trajectory.steps[branch:]
        ),
        steps=len(trajectory.steps),
        trajectory=trajectory,
    )


def counterfactual_trial(
    env: Environment,
    retry: Trajectory,
    chunks: Sequence[InjectedChunk],
    *,
    branch_step: int,
    agent: PolicyBackend,
    seed: int,
    config: RolloutConfig | None = None,
) -> Trial:
    """One continuation with the card's repair (`chunks`: the bank with the card)."""
    (trial,) = continuations(env, retry, chunks, arm="with", branch_step=branch_step,
                             agent=agent, seeds=[seed], config=config)  # fmt: skip
    return trial


@dataclass(frozen=True)
class PairedVerification:
    """k continuations with the card's repair and k without it, on the same seeds pairwise."""

    branch_step: int
    turn_budget: int | None  # turns the blind agent had after the branch (None: env ceiling)
    seeds: tuple[int, ...]
    with_trials: tuple[Trial, ...]
    without_trials: tuple[Trial, ...]

    @property
    def with_successes(self) -> int:
        return sum(trial.success for trial in self.with_trials)

    @property
    def without_successes(self) -> int:
        return sum(trial.success for trial in self.without_trials)

    @property
    def verified(self) -> bool:
        """At least one success with the repair and strictly more with it than without."""
        return self.with_successes >= 1 and self.with_successes > self.without_successes

    def summary(self) -> dict[str, Any]:
        """What the card stores (`extras.verification`) and the summaries report."""
        agents = {trial.agent for trial in (*self.with_trials, *self.without_trials)}
        return {
            "with": self.with_successes,
            "without": self.without_successes,
            "k": len(self.seeds),
            "seeds": list(self.seeds),
            "branch_step": self.branch_step,
            "turn_budget": self.turn_budget,
            "agent": min(agents) if agents else None,
            "verified": self.verified,
        }

    def trial_records(self) -> list[dict[str, Any]]:
        return [trial.as_dict() for trial in (*self.with_trials, *self.without_trials)]


def verify_repair(
    env: Environment,
    retry: Trajectory,
    bank: Sequence[BankEntryPublic],
    content: ChunkContent,
    *,
    target_chunk_id: int | None,
    branch_step: int,
    agent: PolicyBackend,
    seed: int,
    k: int = 4,
    config: RolloutConfig | None = None,
) -> PairedVerification:
    """The paired check of one repair: seeds `seed, seed + 1, ..., seed + k - 1`, each played
    once with the card's chunk in the retry's prompt and once with the retry's prompt as is."""
    if k < 1:
        raise ValueError("k must be >= 1")
    config = config or RolloutConfig()
    seeds = tuple(seed + index for index in range(k))
    common = {"branch_step": branch_step, "agent": agent, "seeds": seeds, "config": config}
    with_card = continuations(env, retry, repaired_bank(bank, content, target_chunk_id),
                              arm="with", **common)  # fmt: skip
    # a separate run, so each seed's episode id (its sampling seeds) is the with-arm's own
    without_card = continuations(env, retry, bank_chunks(bank), arm="without", **common)
    return PairedVerification(
        branch_step=with_card[0].branch_step,
        turn_budget=config.max_turns,
        seeds=seeds,
        with_trials=tuple(with_card),
        without_trials=tuple(without_card),
    )


def verifying_trial(trials: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The record a verified card carries of its first successful continuation with the repair
    (None: none succeeded)."""
    found = next((t for t in trials if t.get("success") and t.get("arm") == "with"), None)
    if found is None:
        return None
    keys = ("branch_step", "prompt_hash", "agent", "seed", "reward", "termination")
    return {**{key: found.get(key) for key in keys}, "outcome": "success"}
