"""Single-rate intervals that hold their level, Holm's adjustment and the MDE, against textbook
answers (exact binomial coverage, Holm's worked example, the normal quantiles)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from shared.apps.experiment import stats
from shared.runtime.paired_bootstrap import ALL_ZERO_NOTE, Metric, paired_bootstrap


def exact_coverage(interval, n: int, p: float) -> float:
    """P(p inside interval(k, n)) over k ~ Binomial(n, p), summed exactly."""
    return sum(
        binom.pmf(k, n, p) for k in range(n + 1) if interval(k, n)[0] <= p <= interval(k, n)[1]
    )


def wilson(k: int, n: int) -> tuple[float, float]:
    found = stats.wilson(k / n, n)
    return found["low"], found["high"]


def percentile_bootstrap(k: int, n: int) -> tuple[float, float]:
    """What the levels used before: the percentile bootstrap of a rate, in the limit of
    infinitely many resamples (a resampled rate is Binomial(n, k/n) / n)."""
    return binom.ppf(0.025, n, k / n) / n, binom.ppf(0.975, n, k / n) / n


@pytest.mark.parametrize("p", [0.02, 0.05, 0.1, 0.3, 0.5, 0.98])
@pytest.mark.parametrize("n", [20, 40, 400])
def test_wilson_holds_its_level_where_the_percentile_bootstrap_does_not(n, p):
    assert exact_coverage(wilson, n, p) >= 0.92  # Wilson's known floor is about 0.92-0.93


def test_the_percentile_bootstrap_under_covers_rare_successes():
    """The issue's simulation, computed exactly: at p = 0.02 and n = 40 it covers ~53 %."""
    assert exact_coverage(percentile_bootstrap, 40, 0.02) < 0.6
    assert exact_coverage(percentile_bootstrap, 40, 0.05) < 0.9


def test_no_success_still_has_an_upper_bound():
    zero = stats.wilson(0.0, 20)
    assert zero["low"] == 0.0
    assert zero["high"] == pytest.approx(1.95996**2 / (20 + 1.95996**2), rel=1e-4)


def test_holm_matches_the_worked_example():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> max(0.06, 0.04)
    found = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert [f["p"] for f in found] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [f["reject"] for f in found] == [True, False, False, True]
    assert stats.holm([]) == []


def test_mde_is_the_normal_quantiles_times_the_standard_error():
    assert stats.mde(0.01) == pytest.approx((1.959964 + 0.841621) * 0.01, rel=1e-5)
    assert stats.paired_se(0.25, 100) == pytest.approx(0.05)
    assert stats.paired_se(0.25, 100, seed_variance=0.02, seeds=2) == pytest.approx(
        (0.0025 + 0.01) ** 0.5
    )
    assert stats.paired_se(0.25, 100, seed_variance=0.02, seeds=1) == pytest.approx(0.05)


def test_a_contrast_reads_against_the_effect_of_interest():
    wide = {"estimate": 0.01, "low": -0.08, "high": 0.10}
    narrow = {"estimate": 0.0, "low": -0.005, "high": 0.008}
    assert stats.verdict(wide, {"reject": False}, 0.02).startswith("cannot tell")
    assert stats.verdict(narrow, {"reject": False}, 0.02) == "no difference as large as 2.0 pp"
    assert stats.verdict(wide, {"reject": True}, 0.02) == "differs (survives Holm)"


def test_the_paired_bootstrap_says_when_every_difference_is_zero():
    same = {"y": np.array([1.0, 0.0] * 10)}
    found = paired_bootstrap(same, same, Metric("y", "y"), resamples=200, seed=1)
    assert (found["low"], found["high"], found["p"]) == (0.0, 0.0, 1.0)
    assert found["note"] == ALL_ZERO_NOTE
    other = {"y": np.ones(20)}  # better on 10 of 20 tasks, worse on none
    moved = paired_bootstrap(other, same, Metric("y", "y"), resamples=200, seed=1)
    assert "note" not in moved and moved["p"] < 0.05
