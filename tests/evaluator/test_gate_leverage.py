"""A small gate whose design has a leverage-1 task is refused before any rollout (issue 11).

The repro: Gate A with 4 drafts on 8 tasks. Some mask seeds give a full-rank design in which
one task's mask pattern alone pins a coefficient; statsmodels' HC3 then divides by zero and
every standard error is NaN, which used to crash the gate while recording its decision.
"""

import warnings

import numpy as np
import pytest
import statsmodels.api as sm

from services.evaluator.design import (
    LEVERAGE_MESSAGE,
    RankDeficientError,
    check_full_rank,
    design_matrix,
    gate_a_design,
)
from services.evaluator.gate_run import GatePlan, run_gate

TASKS = tuple(f"task-{i:06d}" for i in range(8))
DRAFTS = ["a", "b", "c", "d"]


def _hc3_is_sound(matrix: np.ndarray) -> bool:
    """statsmodels' own verdict, independent of the check under test (any non-constant y):
    finite HC3 errors and every hat value (its influence measure) clearly below 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sm.OLS(np.arange(len(matrix)) % 3.0, matrix).fit(cov_type="HC3")
        hat = result.get_influence().hat_matrix_diag
    return bool(np.all(np.isfinite(result.bse)) and hat.max() < 0.99)


def _hc3_is_nan(matrix: np.ndarray) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors = sm.OLS(np.arange(len(matrix)) % 3.0, matrix).fit(cov_type="HC3").bse
    return bool(np.any(np.isnan(errors)))


def _seeds() -> tuple[int, int]:
    """A mask seed whose 4 x 8 design is full rank with undefined HC3, and one where HC3 works."""
    undefined = defined = None
    for seed in range(500):
        matrix = design_matrix(gate_a_design(DRAFTS, mask_seed=seed), TASKS)
        if np.linalg.matrix_rank(matrix) < len(DRAFTS):
            continue
        if _hc3_is_sound(matrix):
            defined = seed if defined is None else defined
        elif _hc3_is_nan(matrix):  # the crash the issue reports
            undefined = seed if undefined is None else undefined
        if undefined is not None and defined is not None:
            return undefined, defined
    raise AssertionError("no seeds of both kinds in range")


class NoRollouts:
    """A runner test double that fails the test if any rollout is asked for."""

    def run(self, *args, **kwargs):
        raise AssertionError("a rollout ran for a design that should have been refused")


def test_a_leverage_one_design_is_refused_and_a_good_one_of_the_same_size_is_not():
    undefined, defined = _seeds()
    with pytest.raises(RankDeficientError, match=LEVERAGE_MESSAGE):
        check_full_rank(design_matrix(gate_a_design(DRAFTS, mask_seed=undefined), TASKS))
    check_full_rank(design_matrix(gate_a_design(DRAFTS, mask_seed=defined), TASKS))


def test_the_refusal_comes_before_any_rollout():
    undefined, _ = _seeds()
    plan = GatePlan(gate_a_design(DRAFTS, mask_seed=undefined), TASKS)
    with pytest.raises(RankDeficientError, match="leverage 1"):
        run_gate(plan, NoRollouts())  # type: ignore[arg-type]
