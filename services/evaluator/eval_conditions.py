"""The conditions of a test-set evaluation, and which of them are one condition.

A condition is a checkpoint and the bank whose every chunk is injected (none: bare). The
reference's four are base/bare, base/S0, trained/bare and trained/S_T (the frozen final bank).
Conditions identical by construction (same checkpoint, same injected chunks, same sampling
index) are rolled out once; a condition with another `sample` index is the same condition under
other sampling seeds: an A/A comparison against it shows the sampling noise of the task set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.contracts.chunks import InjectedChunk

PAPER_CONDITIONS = ("base/bare", "base/S0", "trained/bare", "trained/S_T")
PAPER_COMPARISONS: tuple[tuple[str, str], ...] = (
    ("trained/bare", "base/bare"),
    ("base/S0", "base/bare"),
    ("trained/S_T", "trained/bare"),
    ("trained/S_T", "base/bare"),
)


@dataclass(frozen=True)
class Condition:
    """A checkpoint, and the bank whose every chunk is injected (none: bare).

    `chunk_ids` ("slug@version", bank order) is derived from `chunks`; a report rebuilt from
    stored records gives the ids alone. `sample` indexes the sampling seeds (episode seeds are
    derived from task and sample): the same condition with another sample is an A/A control.
    """

    name: str
    checkpoint_id: str
    chunks: tuple[InjectedChunk, ...] = ()
    bank_id: int | None = None
    chunk_ids: tuple[str, ...] = ()
    sample: int = 0

    def __post_init__(self) -> None:
        derived = tuple(f"{chunk.chunk_id}@{chunk.version}" for chunk in self.chunks)
        if self.chunks and self.chunk_ids and self.chunk_ids != derived:
            raise ValueError(f"condition {self.name}: chunk_ids disagree with chunks")
        if self.chunks:
            object.__setattr__(self, "chunk_ids", derived)

    @property
    def included(self) -> tuple[str, ...]:
        return self.chunk_ids

    @property
    def rollout_key(self) -> tuple[str, tuple[str, ...], int]:
        """What decides its rollouts: two conditions with one key are one condition."""
        return (self.checkpoint_id, self.chunk_ids, self.sample)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint_id": self.checkpoint_id,
            "bank_id": self.bank_id,
            "chunk_ids": list(self.chunk_ids),
            "sample": self.sample,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Condition:
        return cls(
            name=str(data["name"]),
            checkpoint_id=str(data["checkpoint_id"]),
            bank_id=data.get("bank_id"),
            chunk_ids=tuple(data.get("chunk_ids") or ()),
            sample=int(data.get("sample") or 0),
        )


def identical_conditions(conditions: Sequence[Condition]) -> dict[str, str]:
    """Each condition's name -> the first condition with the same rollout key (itself if none)."""
    first: dict[tuple, str] = {}
    return {c.name: first.setdefault(c.rollout_key, c.name) for c in conditions}


def distinct_conditions(conditions: Sequence[Condition]) -> list[Condition]:
    """The conditions that need rollouts of their own (identical ones are rolled out once)."""
    canonical = identical_conditions(conditions)
    return [c for c in conditions if canonical[c.name] == c.name]


def comparison_kind(conditions: Sequence[Condition], a: str, b: str) -> str:
    """identical (one condition by construction: the difference is 0 by definition), A/A (one
    condition, other sampling seeds: the noise floor) or contrast (a real difference)."""
    by_name = {c.name: c for c in conditions}
    left, right = by_name[a], by_name[b]
    if left.rollout_key == right.rollout_key:
        return "identical"
    if left.rollout_key[:2] == right.rollout_key[:2]:
        return "A/A"
    return "contrast"


def aa_comparison(conditions: Sequence[Condition]) -> tuple[str, str] | None:
    """The first (A/A condition, its original) pair among `conditions`, if there is one."""
    for a in conditions:
        for b in conditions:
            if a.sample != b.sample and a.rollout_key[:2] == b.rollout_key[:2] and b.sample == 0:
                return (a.name, b.name)
    return None


def condition_from_bank(name: str, checkpoint_id: str, bank, *, sample: int = 0) -> Condition:
    """A condition injecting every chunk of a registry bank (a `BankPublic`), in bank order."""
    entries = sorted(bank.entries, key=lambda e: e.position)
    chunks = tuple(
        InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in entries
    )
    return Condition(name, checkpoint_id, chunks, bank.id, sample=sample)
