"""Inclusion probabilities of the next training interval from the kept chunks' coefficients.

rho_j = clip(rho_min + (rho_max - rho_min) * beta_j / scale, rho_min, rho_max), where the scale is
the largest kept coefficient unless given. Only strictly positive coefficients are allowed: a
kept chunk always has one, and a nonpositive one would silently pin rho at rho_min.
"""

from __future__ import annotations

from collections.abc import Mapping

RHO_MIN = 0.2
RHO_MAX = 0.9
Q_SKILL_FREE = 0.2  # probability that a training group gets no skill block (S_0 starts with it)


def next_rho(
    coefficients: Mapping[str, float],
    *,
    rho_min: float = RHO_MIN,
    rho_max: float = RHO_MAX,
    scale: float | None = None,
) -> dict[str, float]:
    """rho per kept chunk, in the given order; {} for an empty bank."""
    if not 0 <= rho_min <= rho_max <= 1:
        raise ValueError(f"need 0 <= rho_min <= rho_max <= 1, got {rho_min}, {rho_max}")
    if not coefficients:
        return {}
    nonpositive = [key for key, beta in coefficients.items() if not beta > 0]
    if nonpositive:
        raise ValueError(f"kept chunks need positive coefficients: {', '.join(nonpositive)}")
    scale = max(coefficients.values()) if scale is None else scale
    if not scale > 0:
        raise ValueError("contribution scale must be positive")
    return {
        key: min(max(rho_min + (rho_max - rho_min) * beta / scale, rho_min), rho_max)
        for key, beta in coefficients.items()
    }
