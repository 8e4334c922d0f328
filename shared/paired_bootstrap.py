"""Task-paired percentile bootstrap of a difference between two conditions.

One implementation serves the evaluator's test tables (the demo's four conditions) and
`intraskill experiment`'s arm comparisons: tasks are resampled with replacement and the same
resampled tasks enter both sides, so per-task difficulty cancels out of the interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.hashing import hash_key

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20260901


@dataclass(frozen=True)
class Metric:
    """A condition-level number: the mean of `numerator`, or sum(numerator) / sum(denominator)."""

    name: str
    numerator: str
    denominator: str | None = None

    def value(self, columns: Mapping[str, np.ndarray], index: np.ndarray | None = None) -> Any:
        top = columns[self.numerator] if index is None else columns[self.numerator][index]
        if self.denominator is None:
            return top.mean(axis=-1)
        bottom = columns[self.denominator] if index is None else columns[self.denominator][index]
        total = bottom.sum(axis=-1)
        return np.divide(
            top.sum(axis=-1), total, out=np.zeros_like(total, dtype=float), where=total > 0
        )


def derived_seed(seed: int, *parts: object) -> int:
    """A per-(comparison, metric) seed: the first 8 bytes of sha256("{seed}:{parts...}")."""
    return int.from_bytes(hash_key(seed, *parts)[:8], "big")


def paired_bootstrap(
    a: Mapping[str, np.ndarray],
    b: Mapping[str, np.ndarray],
    metric: Metric,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> dict[str, float]:
    """metric(a) - metric(b) with a task-paired percentile bootstrap interval."""
    n = len(next(iter(a.values())))
    if n == 0:
        raise ValueError("no paired tasks to compare")
    estimate = float(metric.value(a) - metric.value(b))
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(resamples, n))
    draws = metric.value(a, index) - metric.value(b, index)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return {"estimate": estimate, "low": float(low), "high": float(high)}
