"""The method's inclusion probabilities: a bank chunk's rho from the gate coefficient that kept it.

    rho_j = clip(rho_min + (rho_max - rho_min) * alpha_j / scale, rho_min, rho_max)

The trainer checks a bank's rho against it, and the stand-in S_0 (`shared/standin_s0.py`) is
built with it, so both read it from here.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

RHO_MIN = 0.2
RHO_MAX = 0.9

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
    if not coefficients:
        return {}
    bad = {key: value for key, value in coefficients.items() if not value > 0}
    if bad:
        raise ValueError(f"active chunks need a positive coefficient: {bad}")
    top = max(coefficients.values()) if scale is None else scale
    if not top > 0:
        raise ValueError("the contribution scale must be positive")
    return {
        key: min(max(rho_min + (rho_max - rho_min) * value / top, rho_min), rho_max)
        for key, value in coefficients.items()
    }
