"""Fast statistical validation with the simulated policy (a test double of the backend).

The full version, with more replicates and the power table, is benchmarks/gate_validation.py.
"""

import math

import numpy as np
import pytest

from services.evaluator.design import online_design
from services.evaluator.simulation import (
    SimulatedPolicy,
    additive_estimand,
    beta_base_rate,
    run_validation,
    sign_probability,
    simulate_gate,
    tasks_needed,
    uniform_base_rate,
)

DESIGN = online_design(
    [f"c{i}" for i in range(1, 7)], adds=["add-1", "add-2"], rewrites={"c2": ["c2-new"]}
)
EFFECTS = dict(
    zip(DESIGN.column_ids, [0.10, 0.0, 0.08, -0.06, 0.0, 0.05, -0.03, 0.0, 0.12], strict=True)
)


def test_simulated_policy_is_deterministic_and_additive():
    policy = SimulatedPolicy(EFFECTS, uniform_base_rate(0.3, 0.5), seed=1, clip=False)
    first = simulate_gate(DESIGN, policy, [str(i) for i in range(50)])
    assert first == simulate_gate(DESIGN, policy, [str(i) for i in range(50)])
    assert policy.success_probability("7", ("c1", "add-2")) == pytest.approx(
        uniform_base_rate(0.3, 0.5)("7") + 0.22
    )
    with pytest.raises(KeyError, match="ghost"):
        policy.success_probability("7", ("ghost",))
    with pytest.raises(ValueError, match="outside"):
        SimulatedPolicy({"x": 0.9}, lambda _: 0.5, clip=False).success_probability("1", ("x",))
    assert all(set(o.masked) == set(o.bare) and len(o.masked) == 7 for o in first)


def test_hc3_intervals_cover_the_true_effects_at_about_the_nominal_rate():
    replicates, level = 40, 0.95
    tally = run_validation(
        DESIGN, EFFECTS, uniform_base_rate(0.3, 0.55, seed=3), n_tasks=400, replicates=40, seed=3
    )
    estimates, errors = np.array(tally.estimates), np.array(tally.standard_errors)
    truth = np.array([EFFECTS[vid] for vid in DESIGN.column_ids])  # the test's own effects
    assert estimates.shape == errors.shape == (replicates, len(DESIGN.column_ids))
    # coverage recounted here from the raw estimates and errors (normal 95% intervals) ...
    z = 1.959963984540054  # the 97.5% normal quantile
    covered = np.abs(estimates - truth) <= z * errors
    assert tally.summary()["coverage_overall"] == pytest.approx(covered.mean(), abs=1e-12)
    # ... and held to the nominal level: 360 intervals, 3 binomial SEs either side of 0.95
    band = 3 * math.sqrt(level * (1 - level) / covered.size)
    assert abs(covered.mean() - level) <= band, covered.mean()
    # unbiased when the model is well specified: mean estimate within 4 SE of the mean of truth
    standard_error = errors.mean(axis=0) / math.sqrt(replicates)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < 4 * standard_error)


def test_selection_keeps_truly_positive_chunks_and_drops_harmful_ones():
    # four +0.15 chunks and two -0.15 ones keep 0.30-0.40 base rates inside [0, 1]
    strong = dict(
        zip(DESIGN.column_ids, [0.15, 0.0, 0.15, -0.15, 0.0, 0.15, -0.15, 0.0, 0.15], strict=True)
    )
    tally = run_validation(
        DESIGN, strong, uniform_base_rate(0.3, 0.4, seed=5), n_tasks=800, replicates=20, seed=5
    )
    rate = dict(zip(DESIGN.column_ids, tally.selected / tally.replicates, strict=True))
    for vid, effect in strong.items():
        if effect > 0 and vid != "c2":
            assert rate[vid] >= 0.95, (vid, rate[vid])
        if effect < 0:
            assert rate[vid] <= 0.05, (vid, rate[vid])
    # the family: the old c2 (0) loses to its rewrite (+0.15) nearly always
    assert rate["c2-new"] >= 0.95 and rate["c2"] <= 0.05


def test_clipped_policy_is_covered_for_the_additive_projection():
    base = beta_base_rate(0.79, 0.67, seed=9)
    estimand = additive_estimand(DESIGN, EFFECTS, base, n_tasks=100_000, seed=9)
    # clipping near 1 attenuates every effect toward 0 but keeps its sign
    for vid, effect in EFFECTS.items():
        assert abs(estimand[vid]) <= abs(effect) + 0.003
        if abs(effect) >= 0.05:
            assert np.sign(estimand[vid]) == np.sign(effect)
    tally = run_validation(
        DESIGN, EFFECTS, base, n_tasks=400, replicates=30, seed=9, clip=True, estimand=estimand
    )
    assert 0.90 <= tally.summary()["coverage_overall"] <= 0.99


def test_power_formulas():
    # 0.747 = SE x sqrt(n) of the reference round 0 (16 columns)
    assert tasks_needed(0.10, 0.747) == pytest.approx(438, abs=2)
    assert tasks_needed(0.02, 0.747) > 10_000
    assert sign_probability(0.0, 0.747, 400) == 0.5
    assert sign_probability(0.10, 0.747, 400) > 0.99
