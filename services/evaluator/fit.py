"""Paired-delta OLS: delta_i = R_i - B_i regressed on the inclusion vector C_i.

No intercept, no centering of C, no subtraction of a global bare mean: an all-zero mask is a
valid row (its two stochastic rollouts can still differ). One fit per reward component; the
strict reward decides. HC3 standard errors and 95% intervals are reported beside every
coefficient (the reference run reported none), with the one-sided lower bound at the same level
(beta - z_level * SE: 95 % sure the effect is at least this); the delta outcome is
heteroskedastic by construction (a 0/1 reward difference), hence HC3 rather than the classical
variance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import statsmodels.api as sm
from scipy import stats

from services.evaluator.design import RANK_DEFICIENT_MESSAGE, RankDeficientError, check_full_rank
from shared.contracts.evaluator_api.schemas import Solver

COMPONENTS = ("r_strict", "r_success", "r_type", "r_att", "r_option", "r_price", "r_loose")
PRIMARY = "r_strict"
# The reference solver zeroes coefficients this small: they are rounding noise, and a rounding
# residue must never count as a strictly positive effect in selection.
ZERO_TOLERANCE = 1e-12

# the solvers the wire contract names (what each computes is said there)
SOLVERS: tuple[Solver, ...] = ("statsmodels", "reference")


class FitError(ValueError):
    """The observations cannot be fit (wrong shape, missing or non-finite components)."""


@dataclass(frozen=True)
class PairedObservation:
    """One validation task: its mask and the components of its masked and bare rollouts."""

    task_id: str
    mask: tuple[int, ...]
    masked: Mapping[str, float]
    bare: Mapping[str, float]
    sample: int = 0

    def delta(self, component: str) -> float:
        return float(self.masked[component]) - float(self.bare[component])


@dataclass(frozen=True)
class ComponentFit:
    """The fit of one reward component: coefficient, HC3 SE, two-sided interval and one-sided
    lower bound per column."""

    component: str
    ids: tuple[str, ...]
    coefficients: tuple[float, ...]
    hc3_se: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    n: int
    masked_mean: float
    bare_mean: float
    level: float
    lower_bound: tuple[float, ...] = ()  # one-sided at `level`: beta - z_level * SE

    @property
    def delta_mean(self) -> float:
        return self.masked_mean - self.bare_mean

    def coefficient_map(self) -> dict[str, float]:
        return dict(zip(self.ids, self.coefficients, strict=True))

    def lower_bound_map(self) -> dict[str, float]:
        return dict(zip(self.ids, self.lower_bound, strict=True))

    def as_dict(self) -> dict[str, object]:
        return {
            "component": self.component,
            "n": self.n,
            "level": self.level,
            "masked_mean": self.masked_mean,
            "bare_mean": self.bare_mean,
            "delta_mean": self.delta_mean,
            "coefficients": self.coefficient_map(),
            "hc3_se": dict(zip(self.ids, self.hc3_se, strict=True)),
            "ci_low": dict(zip(self.ids, self.ci_low, strict=True)),
            "ci_high": dict(zip(self.ids, self.ci_high, strict=True)),
            "lower_bound": self.lower_bound_map(),
        }


@dataclass(frozen=True)
class GateFit:
    """Every component's fit; `primary` (the strict reward) is the one selection uses."""

    ids: tuple[str, ...]
    components: Mapping[str, ComponentFit]

    @property
    def primary(self) -> ComponentFit:
        return self.components[PRIMARY]

    def auxiliary(self) -> dict[str, ComponentFit]:
        return {name: fit for name, fit in self.components.items() if name != PRIMARY}


def fit_component(
    matrix: np.ndarray,
    delta: np.ndarray,
    ids: Sequence[str],
    *,
    component: str = PRIMARY,
    masked_mean: float = math.nan,
    bare_mean: float = math.nan,
    level: float = 0.95,
    solver: Solver = "statsmodels",
) -> ComponentFit:
    """No-intercept OLS of delta on the inclusion matrix, with HC3 SEs and normal intervals."""
    matrix = np.asarray(matrix, dtype=float)
    delta = np.asarray(delta, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != delta.shape[0] or matrix.shape[1] != len(ids):
        raise FitError(
            f"shape mismatch: matrix {matrix.shape}, delta {delta.shape}, {len(ids)} ids"
        )
    if not np.all(np.isfinite(delta)):
        raise FitError(f"non-finite {component} deltas")
    check_full_rank(matrix)
    # statsmodels adds no constant unless asked: exactly the no-intercept, uncentred model.
    result = sm.OLS(delta, matrix).fit(cov_type="HC3")
    if solver == "statsmodels":
        params = np.asarray(result.params, dtype=float)
    elif solver == "reference":
        params = np.array(normal_equations_solve(matrix.tolist(), delta.tolist()))
    else:
        raise FitError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    beta = np.where(np.abs(params) <= ZERO_TOLERANCE, 0.0, params)
    se = np.asarray(result.bse, dtype=float)
    z = float(stats.norm.ppf(0.5 + level / 2))
    one_sided = float(stats.norm.ppf(level))
    return ComponentFit(
        component=component,
        ids=tuple(ids),
        coefficients=tuple(float(b) for b in beta),
        hc3_se=tuple(float(s) for s in se),
        ci_low=tuple(float(b - z * s) for b, s in zip(beta, se, strict=True)),
        ci_high=tuple(float(b + z * s) for b, s in zip(beta, se, strict=True)),
        n=int(matrix.shape[0]),
        masked_mean=masked_mean,
        bare_mean=bare_mean,
        level=level,
        lower_bound=tuple(float(b - one_sided * s) for b, s in zip(beta, se, strict=True)),
    )


def fit_gate(
    ids: Sequence[str],
    observations: Sequence[PairedObservation],
    *,
    components: Sequence[str] | None = None,
    level: float = 0.95,
    solver: Solver = "statsmodels",
) -> GateFit:
    """Fit every reward component the observations share (all of them must carry the primary)."""
    if not observations:
        raise FitError("no paired observations to fit")
    width = len(ids)
    for observation in observations:
        if len(observation.mask) != width:
            raise FitError(
                f"task {observation.task_id}: mask has {len(observation.mask)} entries "
                f"for {width} columns"
            )
    names = list(components) if components is not None else _shared_components(observations)
    if PRIMARY not in names:
        raise FitError(f"observations lack the primary component {PRIMARY}")
    matrix = np.array([observation.mask for observation in observations], dtype=float)
    check_full_rank(matrix)  # before any component, so the error names the design, not a fit
    fits: dict[str, ComponentFit] = {}
    for name in names:
        masked = _column(observations, "masked", name)
        bare = _column(observations, "bare", name)
        fits[name] = fit_component(
            matrix,
            masked - bare,
            ids,
            component=name,
            masked_mean=float(masked.mean()),
            bare_mean=float(bare.mean()),
            level=level,
            solver=solver,
        )
    return GateFit(ids=tuple(ids), components=fits)


def _shared_components(observations: Sequence[PairedObservation]) -> list[str]:
    """The component names, in canonical order, that every masked and bare record carries."""
    keys = set(observations[0].masked)
    for observation in observations:
        if set(observation.masked) != keys or set(observation.bare) != keys:
            differing = (set(observation.masked) ^ keys) | (set(observation.bare) ^ keys)
            raise FitError(
                f"task {observation.task_id}: reward components differ between records "
                f"({', '.join(sorted(differing))})"
            )
    return [name for name in COMPONENTS if name in keys] + sorted(keys - set(COMPONENTS))


def _column(observations: Sequence[PairedObservation], arm: str, name: str) -> np.ndarray:
    values = np.array([float(getattr(o, arm)[name]) for o in observations], dtype=float)
    if not np.all(np.isfinite(values)):
        bad = next(
            o.task_id for o, v in zip(observations, values, strict=True) if not np.isfinite(v)
        )
        raise FitError(f"task {bad}: non-finite {arm} {name}")
    return values


def normal_equations_solve(
    rows: Sequence[Sequence[float]], outcome: Sequence[float]
) -> list[float]:
    """The reference solver: X'X b = X'y by Gauss-Jordan with partial pivoting, in plain floats.

    Sums run in task order and the elimination order is the reference's, which is what makes the
    result bit-identical to the published coefficients. Raises on a pivot below
    1e-12 * max(1, scale), as the reference does.
    """
    width = len(rows[0])
    augmented = [
        [sum(row[i] * row[j] for row in rows) for j in range(width)]
        + [sum(row[i] * value for row, value in zip(rows, outcome, strict=True))]
        for i in range(width)
    ]
    scale = max(abs(augmented[i][j]) for i in range(width) for j in range(width))
    tolerance = 1e-12 * max(1.0, scale)
    for column in range(width):
        pivot = max(range(column, width), key=lambda r: abs(augmented[r][column]))
        if abs(augmented[pivot][column]) < tolerance:
            raise RankDeficientError(RANK_DEFICIENT_MESSAGE)
        augmented[column], augmented[pivot] = augmented[pivot], augmented[column]
        head = augmented[column][column]
        augmented[column] = [value / head for value in augmented[column]]
        for r in range(width):
            factor = augmented[r][column]
            if r != column and factor:
                augmented[r] = [
                    a - factor * b for a, b in zip(augmented[r], augmented[column], strict=True)
                ]
    return [augmented[i][width] for i in range(width)]
