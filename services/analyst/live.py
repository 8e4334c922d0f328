"""Counterfactual trials: does a card's own repair turn the failed full-skill retry into a
terminal success? Blind to gold.

One trial (the method's "replays the full-skill trace, locates the earliest causal branch,
proposes the smallest observable repair, and tests that repair in the environment"):

1. The failed retry is replayed: its recorded replies answer every turn before the earliest
   causal branch. ShopSim pages are a deterministic function of the actions, so the replay
   meets the retry's own pages; the trial checks that it did (`replay_faithful`).
2. From the branch on, a blind agent acts. It sees what any policy sees (the visible task,
   the persona document, the pages) and a prompt whose skill block is the frozen bank with
   the card's own deployable chunk added (ADD) or put in place of its target (REWRITE). It
   never sees gold, and nothing but the card's chunk differs from the retry's prompt.
3. The environment scores the episode: only R_success = 1 is a success.

The blind agent is a `PolicyBackend`: the round's frozen policy checkpoint (the default), the
analyst model served as a policy in a fresh context, or the `procedural` TEST DOUBLE standing
in for a policy (see docs/analyst.md, "Counterfactual verification").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from shared.agent.backends.base import PolicyBackend, TurnOutput, TurnRequest
from shared.agent.backends.procedural import ProceduralPolicy, action_output
from shared.agent.prompts import get_layout
from shared.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.agent.trajectory import StepRecord, Trajectory
from shared.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.hashing import content_hash
from shared.registry_api.schemas import BankEntryPublic
from shared.shopsim.types import Environment

PROPOSAL_SLUG = "card-proposal"


@dataclass(frozen=True)
class Trial:
    """One counterfactual trial: where it branched, what prompt and agent, and the verdict."""

    branch_step: int  # turns replayed from the failed retry before the blind agent acts
    prompt_hash: str | None  # hash of the trial's skill block, which carries the card's text
    prompt_carries_card: bool  # that hash is the bank-with-the-card's block
    agent: str  # the blind agent's model id
    seed: int
    replay_faithful: bool  # the replayed turns met the retry's own pages
    reward: float
    success: bool  # R_success = 1, scored, faithful replay, the card's prompt
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
    """Replay `retry` up to `branch_step`, then let `agent` finish with `chunks` in its prompt."""
    branch = max(0, min(branch_step, len(retry.steps)))
    config = config or RolloutConfig(concurrency=1)
    spec = EpisodeSpec(task_id=retry.task_id, seed=seed, chunks=tuple(chunks),
                       episode_id=f"{retry.episode_id}-counterfactual-{branch}-{seed}")  # fmt: skip
    (trajectory,) = run_episodes(env, ReplayThenAct(agent, retry.steps[:branch]), [spec], config)
    faithful = len(trajectory.steps) >= branch and all(
        replayed.action == recorded.action and replayed.observation == recorded.observation
        for replayed, recorded in zip(trajectory.steps[:branch], retry.steps[:branch], strict=True)
    )
    expected = skill_block_hash(chunks, config.prompt_version)
    carries = trajectory.provenance.skill_block_hash == expected
    reached = trajectory.scored and trajectory.components.get("r_success") == 1.0
    return Trial(
        branch_step=branch,
        prompt_hash=trajectory.provenance.skill_block_hash,
        prompt_carries_card=carries,
        agent=agent.model_id,
        seed=seed,
        replay_faithful=faithful,
        reward=trajectory.reward,
        success=bool(reached and faithful and carries),
        termination=trajectory.termination,
        valid_actions=sum(
            step.action is not None and step.protocol_error is None
            for step in trajectory.steps[branch:]
        ),
        steps=len(trajectory.steps),
        trajectory=trajectory,
    )


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
    attempts: int = 1,
    config: RolloutConfig | None = None,
) -> list[Trial]:
    """Up to `attempts` counterfactual trials of one repair (seeds `seed`, `seed + 1`, ...),
    stopping at the first success."""
    chunks = repaired_bank(bank, content, target_chunk_id)
    trials: list[Trial] = []
    for attempt in range(attempts):
        trial = counterfactual_trial(env, retry, chunks, branch_step=branch_step, agent=agent,
                                     seed=seed + attempt, config=config)  # fmt: skip
        trials.append(trial)
        if trial.success:
            break
    return trials


def verifying_trial(trials: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The record a card carries of the trial that verified it (None: none did)."""
    found = next((trial for trial in trials if trial.get("success")), None)
    if found is None:
        return None
    keys = ("branch_step", "prompt_hash", "agent", "seed", "reward", "termination")
    return {**{key: found.get(key) for key in keys}, "outcome": "success"}
