"""The method's inclusion probabilities: a bank chunk's rho from the gate coefficient that kept it.

    rho_j = clip(rho_min + (rho_max - rho_min) * alpha_j / scale, rho_min, rho_max)

The evaluator's gates write it, the trainer checks a bank's rho against it, and the stand-in
S_0 (`shared/runtime/standin_s0.py`) is built with it, so all three read it from here.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

RHO_MIN = 0.2
RHO_MAX = 0.9
Q_SKILL_FREE = 0.2  # probability that a training group gets no skill block (S_0 starts with it)

Key = TypeVar("Key", bound=Hashable)


def rho_from_coefficients(
    coefficients: Mapping[Key, float],
    *,
    rho_min: float = RHO_MIN,
    rho_max: float = RHO_MAX,
    scale: float | None = None,
) -> dict[Key, float]:
    """rho_j = clip(rho_min + (rho_max - rho_min) * alpha_j / scale, rho_min, rho_max).

    The scale is the largest alpha unless given. Every active chunk must have alpha_j > 0: a gate
    keeps only strictly positive coefficients, so anything else is a corrupt bank.
    """
    if not 0 <= rho_min <= rho_max <= 1:
        raise ValueError(f"need 0 <= rho_min <= rho_max <= 1, got {rho_min}, {rho_max}")
    if not coefficients:
        return {}
    bad = [str(key) for key, value in coefficients.items() if not value > 0]
    if bad:
        raise ValueError(f"active chunks need positive coefficients: {', '.join(bad)}")
    top = max(coefficients.values()) if scale is None else scale
    if not top > 0:
        raise ValueError("the contribution scale must be positive")
    return {
        key: min(max(rho_min + (rho_max - rho_min) * value / top, rho_min), rho_max)
        for key, value in coefficients.items()
    }
