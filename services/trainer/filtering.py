"""The dynamic sampling filter (the reference's `fully_scored_group_filter` + slime's waves).

Groups are judged after all siblings are scored, in this order:

1. technical failure: any unscored sibling. Dropped, never filler; after
   `max_consecutive_failures` of them in a row the run aborts.
2. spread: max - min reward (one reward per episode) > epsilon. Kept.
3. zero variance (all equal). Dropped only while `remaining` = submitted - dropped exceeds the
   target; otherwise admitted as filler.

Kept groups are never evicted; groups finishing after the target is met are ignored. While fewer
than `target` are kept, another wave is submitted once `remaining` < target, so a third wave
happens only after heavy technical drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

Verdict = Literal["technical_failure", "spread", "zero_variance"]
G = TypeVar("G")


class TooManyFailures(RuntimeError):
    """Too many technically failed groups in a row: something outside the policy is broken."""


def group_verdict(
    scored: Sequence[bool], rewards: Sequence[float], *, epsilon: float = 1e-6
) -> Verdict:
    """Classify one group from its siblings' scored flags and rewards (one per episode)."""
    if not all(scored):
        return "technical_failure"
    if max(rewards) - min(rewards) > epsilon:
        return "spread"
    return "zero_variance"


@dataclass
class WaveFilter(Generic[G]):
    """Admits groups as they finish until `target` are kept; counts every decision."""

    target: int
    max_consecutive_failures: int = 8
    kept: list[G] = field(default_factory=list)
    submitted: int = 0
    dropped_technical: int = 0
    dropped_zero_variance: int = 0
    filler: int = 0
    ignored: int = 0
    consecutive_failures: int = 0

    @property
    def dropped(self) -> int:
        return self.dropped_technical + self.dropped_zero_variance

    @property
    def remaining(self) -> int:
        return self.submitted - self.dropped

    @property
    def full(self) -> bool:
        return len(self.kept) >= self.target

    def needs_wave(self) -> bool:
        """Submit another wave? Only while short of the target and too few groups remain."""
        return not self.full and self.remaining < self.target

    def submit(self, groups: int) -> None:
        self.submitted += groups

    def offer(self, group: G, verdict: Verdict) -> bool:
        """Decide on one finished group; returns whether it was admitted."""
        if self.full:
            self.ignored += 1
            return False
        if verdict == "technical_failure":
            self.dropped_technical += 1
            self.consecutive_failures += 1
            if self.consecutive_failures >= self.max_consecutive_failures:
                raise TooManyFailures(
                    f"{self.consecutive_failures} technically failed groups in a row: check the "
                    "environment and the policy backend (episodes end unscored)"
                )
            return False
        self.consecutive_failures = 0
        if verdict == "zero_variance":
            if self.remaining > self.target:
                self.dropped_zero_variance += 1
                return False
            self.filler += 1
        self.kept.append(group)
        return True
