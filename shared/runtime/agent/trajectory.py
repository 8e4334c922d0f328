"""Trajectory records: what one episode did, scored how, with the exact tokens GRPO trains on.

One JSON object per line (`TRAJECTORY_SCHEMA`). Token data lives in segments: each segment is a
token-contiguous sequence (prompt pieces and generated pieces interleaved, in the order the model
saw them), with a loss mask that is 1 exactly on generated tokens and the sampling log-prob of each
generated token. An episode whose chat template re-rendered earlier turns differently has several
segments; they share the episode id, and the advantage is computed once per episode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRAJECTORY_SCHEMA = "intraskill-episode-v1"

Termination = Literal["purchase", "action_limit", "generation_length"]
REWARD_COMPONENTS = ("r_strict", "r_success", "r_type", "r_att", "r_option", "r_price", "r_loose")


class Provenance(BaseModel):
    """Everything needed to say which model, skill text, prompt and environment made an episode."""

    model_config = ConfigDict(frozen=True)

    backend: str
    model_id: str
    checkpoint_id: str
    bank_id: str | None = None
    bank_hash: str | None = None
    inclusion: list[int] | None = None
    injected: list[str] = Field(
        default_factory=list, description="'chunk_id@version' in bank order"
    )
    skill_block_hash: str | None = None
    prompt_version: str
    prompt_fingerprint: str
    action_protocol: str
    skill_renderer: str
    env_version: str
    decoding: dict[str, Any]
    seed: int


class Segment(BaseModel):
    """A token-contiguous training sample: ids, loss mask (1 = generated) and sampling log-probs."""

    turns: list[int] = Field(description="the turns whose tokens lie in this segment")
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] = Field(
        description="sampling log-prob of generated tokens; 0.0 elsewhere"
    )

    @property
    def generated_tokens(self) -> int:
        return sum(self.loss_mask)


class StepRecord(BaseModel):
    """One turn: the reply, the action it became (or the protocol error), and what followed."""

    turn: int
    reply: str
    reasoning: str = ""
    action: str | None = None
    protocol_error: dict[str, str] | None = None
    env_reason: str | None = None
    observation: str | None = None
    page: str | None = None
    done: bool = False
    finish_reason: str
    prompt_tokens: int | None = None
    prompt_tokens_new: int | None = Field(
        None, description="prompt tokens not already in the segment"
    )
    generated_tokens: int
    segment: int | None = None
    generate_s: float = 0.0
    env_s: float = 0.0


class Trajectory(BaseModel):
    """One episode, scored or not; `scored` is False only for technical failures."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = TRAJECTORY_SCHEMA
    episode_id: str
    group_id: str | None = None
    task_id: str
    provenance: Provenance
    scored: bool
    termination: Termination | None
    error: str | None = None
    reward: float
    components: dict[str, float]
    steps: list[StepRecord]
    initial_observation: str = ""
    segments: list[Segment] = Field(default_factory=list)
    exact_tokens: bool = Field(description="segments hold the sampled tokens and log-probs")
    token_counts: dict[str, int] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    protocol_errors: int = 0

    def to_json(self) -> str:
        return self.model_dump_json()


def zero_components() -> dict[str, float]:
    return dict.fromkeys(REWARD_COMPONENTS, 0.0)


def is_scorable(components: dict[str, float]) -> bool:
    """The reference's rule: finite components and a binary success."""
    return all(
        math.isfinite(components.get(name, math.nan)) for name in REWARD_COMPONENTS
    ) and components["r_success"] in (0.0, 1.0)


class TokenLedger:
    """Builds an episode's segments turn by turn from exact prompt and generated ids."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def add_turn(
        self,
        turn: int,
        prompt_ids: Sequence[int],
        generated_ids: Sequence[int],
        logprobs: Sequence[float],
    ) -> tuple[int, int]:
        """Record one turn; returns (segment index, prompt tokens new to the segment).

        The turn continues the current segment when its prompt starts with every token of that
        segment (prompt and generation alike); otherwise the template re-rendered history and the
        turn forks a new segment.
        """
        if len(generated_ids) != len(logprobs):
            raise ValueError("one log-prob per generated token")
        current = self.segments[-1] if self.segments else None
        if current is not None and _starts_with(prompt_ids, current.token_ids):
            new_prompt = list(prompt_ids[len(current.token_ids) :])
            current.turns.append(turn)
        else:
            current = Segment(turns=[turn], token_ids=[], loss_mask=[], logprobs=[])
            self.segments.append(current)
            new_prompt = list(prompt_ids)
        current.token_ids += new_prompt + list(generated_ids)
        current.loss_mask += [0] * len(new_prompt) + [1] * len(generated_ids)
        current.logprobs += [0.0] * len(new_prompt) + [float(value) for value in logprobs]
        return len(self.segments) - 1, len(new_prompt)


def _starts_with(ids: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(ids) >= len(prefix) and list(ids[: len(prefix)]) == list(prefix)


def write_jsonl(
    path: str | Path, trajectories: Iterable[Trajectory], *, append: bool = False
) -> int:
    """Write trajectories one per line; returns how many."""
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(trajectory.to_json() + "\n")
            count += 1
    return count


def read_jsonl(path: str | Path) -> Iterator[Trajectory]:
    """Read trajectories back; a line that does not parse raises with its line number."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.model_validate(json.loads(line))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a trajectory record: {error}") from error
