"""The gate page's coefficient plot as inline SVG geometry: one row per pool column, a dot at
the coefficient, a whisker over its CI, a line at zero. Drawn on the server: no script."""

from __future__ import annotations

import math
from dataclasses import dataclass

WIDTH, LABEL, ROW, PAD = 760, 230, 24, 28  # PAD keeps the end ticks' labels inside


MAX_LABEL = 32  # characters that fit the label column at 12 px


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


@dataclass(frozen=True)
class Mark:
    label: str
    full_label: str
    status: str
    y: float
    x: float
    x_low: float | None
    x_high: float | None


@dataclass(frozen=True)
class Plot:
    width: int
    height: int
    zero_x: float
    axis_y: float
    axis_from: float
    axis_to: float
    ticks: list[tuple[float, str]]
    marks: list[Mark]
    axis_title: str
    title_y: float


def _nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) inside [low, high]."""
    raw = (high - low) / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def coefficient_plot(
    rows: list[tuple[str, str, float, float | None, float | None]], axis_title: str = ""
) -> Plot:
    """`rows` are (label, status, coefficient, ci_low, ci_high) in display order; the axis
    title says what the numbers on the axis are."""
    values = [0.0] + [v for _, _, c, lo, hi in rows for v in (c, lo, hi) if v is not None]
    low, high = min(values), max(values)
    margin = (high - low) * 0.08 or 0.01
    low, high = low - margin, high + margin
    span = WIDTH - LABEL - 2 * PAD

    def x(value: float) -> float:
        return round(LABEL + PAD + (value - low) / (high - low) * span, 1)

    marks = [
        Mark(
            _short(label),
            label,
            status,
            PAD + i * ROW + ROW / 2,
            x(coef),
            None if lo is None else x(lo),
            None if hi is None else x(hi),
        )
        for i, (label, status, coef, lo, hi) in enumerate(rows)
    ]
    axis_y = PAD + len(rows) * ROW + 4
    ticks = [(x(t), f"{t:+.3g}" if abs(t) > 1e-12 else "0") for t in _nice_ticks(low, high)]
    title_y = axis_y + 38
    return Plot(
        WIDTH, int(title_y + 10), x(0.0), axis_y, x(low), x(high), ticks, marks, axis_title, title_y
    )
