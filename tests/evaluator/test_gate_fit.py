import math

import numpy as np
import pytest

from services.evaluator.design import RankDeficientError, design_matrix, online_design
from services.evaluator.fit import (
    FitError,
    PairedObservation,
    fit_component,
    fit_gate,
    normal_equations_solve,
)

IDS = tuple(f"c{i}" for i in range(6))
DESIGN = online_design(list(IDS))
TASKS = [str(i) for i in range(300)]
MATRIX = design_matrix(DESIGN, TASKS)
BETA = np.array([0.10, -0.05, 0.0, 0.02, 0.30, -0.20])


@pytest.mark.parametrize("solver", ["statsmodels", "reference"])
def test_noise_free_deltas_recover_the_effects(solver):
    fit = fit_component(MATRIX, MATRIX @ BETA, IDS, solver=solver)
    assert np.allclose(fit.coefficients, BETA, atol=1e-12)
    assert fit.coefficients[2] == 0.0  # a rounding residue is zeroed, never "positive"


def test_no_intercept_and_no_centering():
    # A constant shift in every delta is not absorbed by an intercept: it loads on the columns
    # in proportion to the least-squares projection of the ones vector.
    shifted = fit_component(MATRIX, MATRIX @ BETA + 0.1, IDS)
    projection = np.linalg.lstsq(MATRIX, np.full(len(TASKS), 0.1), rcond=None)[0]
    assert np.allclose(np.array(shifted.coefficients) - BETA, projection, atol=1e-12)
    assert not np.allclose(shifted.coefficients, BETA, atol=1e-3)


def test_hc3_errors_match_the_sandwich_formula_and_intervals_use_them():
    rng = np.random.default_rng(7)
    delta = MATRIX @ BETA + rng.normal(0, 0.4, len(TASKS))
    fit = fit_component(MATRIX, delta, IDS)
    bread = np.linalg.inv(MATRIX.T @ MATRIX)
    beta = bread @ MATRIX.T @ delta
    residual = delta - MATRIX @ beta
    leverage = np.einsum("ij,jk,ik->i", MATRIX, bread, MATRIX)
    meat = MATRIX.T @ (MATRIX * (residual**2 / (1 - leverage) ** 2)[:, None])
    expected_se = np.sqrt(np.diag(bread @ meat @ bread))
    assert np.allclose(fit.hc3_se, expected_se, rtol=1e-10)
    for b, se, low, high in zip(fit.coefficients, fit.hc3_se, fit.ci_low, fit.ci_high, strict=True):
        assert low == pytest.approx(b - 1.959963984540054 * se)
        assert high == pytest.approx(b + 1.959963984540054 * se)
    # the one-sided 95% lower bound: the normal's 95th percentile, not the two-sided 97.5th
    for b, se, bound in zip(fit.coefficients, fit.hc3_se, fit.lower_bound, strict=True):
        assert bound == pytest.approx(b - 1.6448536269514722 * se)
    assert fit.as_dict()["lower_bound"] == dict(zip(IDS, fit.lower_bound, strict=True))


def test_reference_solver_agrees_with_statsmodels():
    rng = np.random.default_rng(3)
    delta = rng.integers(-1, 2, len(TASKS)).astype(float)
    reference = normal_equations_solve(MATRIX.tolist(), delta.tolist())
    statsmodels_fit = fit_component(MATRIX, delta, IDS)
    assert np.allclose(reference, statsmodels_fit.coefficients, atol=1e-12)
    with pytest.raises(RankDeficientError):
        normal_equations_solve([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], [1.0, 2.0, 3.0])


def _observations(delta_strict, *, extra=None):
    rows = []
    for task, mask, value in zip(TASKS, MATRIX.astype(int), delta_strict, strict=True):
        masked = {"r_strict": max(value, 0.0), "r_loose": 0.5}
        bare = {"r_strict": max(-value, 0.0), "r_loose": 0.25}
        rows.append(PairedObservation(task, tuple(mask), masked, bare))
    return rows


def test_fit_gate_fits_every_shared_component_and_keeps_all_zero_rows():
    delta = np.sign(MATRIX @ BETA)
    observations = _observations(delta)
    assert any(sum(o.mask) == 0 for o in observations)
    fit = fit_gate(IDS, observations)
    assert list(fit.components) == ["r_strict", "r_loose"]
    assert fit.primary.n == len(TASKS)
    assert fit.components["r_loose"].delta_mean == pytest.approx(0.25)
    assert fit.primary.masked_mean == pytest.approx(np.mean(np.maximum(delta, 0)))
    assert set(fit.auxiliary()) == {"r_loose"}


def test_fit_gate_refuses_bad_observations():
    observations = _observations(np.zeros(len(TASKS)))
    broken = [
        *observations[:-1],
        PairedObservation(
            "x", observations[-1].mask, {"r_strict": 1.0}, {"r_strict": 0.0, "r_loose": 0.0}
        ),
    ]
    with pytest.raises(FitError, match="components differ"):
        fit_gate(IDS, broken)
    nan = [
        *observations[:-1],
        PairedObservation(
            "y",
            observations[-1].mask,
            {"r_strict": math.nan, "r_loose": 0.0},
            {"r_strict": 0.0, "r_loose": 0.0},
        ),
    ]
    with pytest.raises(FitError, match="task y: non-finite masked r_strict"):
        fit_gate(IDS, nan)
    with pytest.raises(FitError, match="mask has 5 entries"):
        fit_gate(IDS, [PairedObservation("z", (0,) * 5, {"r_strict": 0.0}, {"r_strict": 0.0})])
    with pytest.raises(FitError, match="primary component"):
        fit_gate(IDS, observations, components=["r_loose"])
    with pytest.raises(RankDeficientError, match="rank deficient"):
        fit_gate(IDS, observations[:6])
    with pytest.raises(FitError, match="no paired observations"):
        fit_gate(IDS, [])


def test_decide_admits_by_the_coefficient_or_by_the_lower_bound():
    from services.evaluator.decision import decide

    design = online_design(["a"], adds=["b"])
    rng = np.random.default_rng(0)
    observations = []
    for i in range(120):  # "a" helps a lot, "b" a little (+0.06), both under noise
        mask = (int(rng.integers(2)), int(rng.integers(2)))
        delta = 0.5 * mask[0] + 0.06 * mask[1] + float(rng.normal(0, 0.3))
        observations.append(PairedObservation(f"t{i}", mask, {"r_strict": delta},
                                              {"r_strict": 0.0}))  # fmt: skip
    plain = decide(design, observations)
    strict = decide(design, observations, admit="lower_bound")
    bound = strict.fit.primary.lower_bound_map()
    assert plain.fit.primary.coefficient_map()["b"] > 0 >= bound["b"] and bound["a"] > 0
    assert set(plain.selection.selected) == {"a", "b"}
    assert strict.selection.selected == ("a",) and strict.selection.status["b"] == "below_bound"
    assert strict.as_json()["admit"] == "lower_bound"
    assert strict.as_json()["lower_bound"] == pytest.approx(bound)
    with pytest.raises(ValueError, match="admit"):
        decide(design, observations, admit="optimistic")
