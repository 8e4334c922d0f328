"""What an experiment can detect and which of its differences survive: single-rate intervals,
the minimum detectable difference (MDE) and Holm's step-down adjustment (pure functions).

* Single rates (an arm's test success, its mean strict reward): the Wilson score interval with
  n = test tasks. It holds its level near 0 and 1, where the percentile bootstrap misses (at
  p = 0.02 and n = 40 it covered 53 % of the time) and 0/n collapses to [0, 0]. An arm's column
  is a mean over its seeds, and the strict reward is not binary; both are means of values in
  [0, 1], whose variance is at most mu (1 - mu), so the binomial interval at n tasks is
  conservative for them.
* MDE: the smallest true paired difference a two-sided test at level alpha finds with the
  given power, (z_{1 - alpha/2} + z_{power}) x SE, SE from the paired differences' variance
  over tasks, plus the seeds' variance when there are at least two seeds.
* Holm: the contrasts of one comparison table form one family per metric; Holm (1979) controls
  the family-wise error rate at alpha under any dependence between the contrasts (they share
  the reference arm), is uniformly more powerful than Bonferroni, and needs only each row's
  p-value; simultaneous intervals would need the joint bootstrap distribution of all rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.80


def z(probability: float) -> float:
    return NormalDist().inv_cdf(probability)


def wilson(mean: float, n: int, level: float = 0.95) -> dict[str, float]:
    """The Wilson score interval of a rate (or a mean in [0, 1]) observed over n units."""
    if n <= 0:
        raise ValueError("a rate needs at least one task")
    k = z(1 - (1 - level) / 2)
    centre = (mean + k * k / (2 * n)) / (1 + k * k / n)
    half = k / (1 + k * k / n) * math.sqrt(mean * (1 - mean) / n + k * k / (4 * n * n))
    return {
        "estimate": float(mean),
        "low": max(0.0, centre - half),
        "high": min(1.0, centre + half),
        "method": "wilson",
    }


def mde(se: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The minimum detectable difference of a two-sided level-alpha test with standard error se."""
    return (z(1 - alpha / 2) + z(power)) * se


def paired_se(task_variance: float, n_tasks: int, seed_variance: float = 0.0, seeds: int = 1):
    """SE of an arm-vs-arm difference: the paired per-task variance over n tasks, plus the
    variance of the per-seed differences over the seeds (0 when not measured)."""
    return math.sqrt(task_variance / n_tasks + (seed_variance / seeds if seeds > 1 else 0.0))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[dict[str, float | bool]]:
    """Holm's step-down adjusted p-values, in the input's order, and whether each rejects."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return [{"p": p, "reject": p <= alpha} for p in adjusted]


def verdict(difference: dict[str, float], adjusted: dict[str, float | bool], effect: float) -> str:
    """The contrast in words, against the effect of interest."""
    size = f"{100 * effect:.1f} pp"
    if adjusted["reject"]:
        return "differs (survives Holm)"
    if difference["high"] - difference["low"] > effect:
        return f"cannot tell: the interval is wider than the effect of interest ({size})"
    if -effect < difference["low"] and difference["high"] < effect:
        return f"no difference as large as {size}"
    return "not significant after Holm"
