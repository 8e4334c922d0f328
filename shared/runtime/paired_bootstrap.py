"""Task-paired percentile bootstrap of a difference between two conditions.

One implementation serves the evaluator's test tables (the demo's four conditions) and
`intraskill experiment`'s arm comparisons: tasks are resampled with replacement and the same
resampled tasks enter both sides, so per-task difficulty cancels out of the interval.

The interval is the percentile interval (not BCa: with tens of binary tasks the acceleration
estimate is itself noisy, and the reference reports percentile intervals). `p` is the
bootstrap's own two-sided p-value for "no difference", 2 x min(P(d* <= 0), P(d* >= 0)), the
test the interval inverts; draws of exactly 0 count on both sides, which keeps it conservative
for outcomes with ties. When every paired difference is 0 the interval is [0, 0] by
arithmetic, not by certainty: the result says so (`note`), and `p` is 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.contracts.hashing import hash_key

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
    """metric(a) - metric(b) with a task-paired percentile bootstrap interval and p-value."""
    n = len(next(iter(a.values())))
    if n == 0:
        raise ValueError("no paired tasks to compare")
    estimate = float(metric.value(a) - metric.value(b))
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(resamples, n))
    draws = metric.value(a, index) - metric.value(b, index)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    p = min(1.0, 2 * min(float(np.mean(draws <= 0)), float(np.mean(draws >= 0))))
    result = {"estimate": estimate, "low": float(low), "high": float(high), "p": p}
    if _all_pairs_equal(a, b, metric):
        result["note"] = ALL_ZERO_NOTE
    return result


ALL_ZERO_NOTE = (
    "every paired difference is 0: the bootstrap cannot vary, so [0, 0] says nothing about "
    "precision (the A/A row and the MDE do)"
)


def _all_pairs_equal(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], metric: Metric):
    fields = [metric.numerator] + ([metric.denominator] if metric.denominator else [])
    return all(np.array_equal(a[f], b[f]) for f in fields)
