"""The gate page's coefficient plot: marks where the numbers say, round ticks, labels that fit."""

from __future__ import annotations

import itertools
import math

from services.console.plot import LABEL, MAX_LABEL, WIDTH, coefficient_plot

ROWS = [
    ("a-long-candidate-slug-0123456789abcdef v1", "selected", 0.191, 0.052, 0.330),
    ("b v1", "selected", 0.046, -0.085, 0.176),
    ("c v2", "non_positive", -0.010, None, None),
]


def test_marks_sit_in_order_of_value_with_zero_between_them():
    plot = coefficient_plot(ROWS)
    a, b, c = plot.marks
    assert c.x < plot.zero_x < b.x < a.x  # -0.010 < 0 < 0.046 < 0.191
    assert a.x_low < a.x < a.x_high and c.x_low is None
    assert b.x_low < plot.zero_x  # b's interval crosses zero
    assert all(LABEL <= x <= WIDTH for m in plot.marks for x in (m.x, m.x_low or LABEL))
    assert [m.y for m in plot.marks] == sorted(m.y for m in plot.marks)


def test_ticks_are_round_steps_and_long_labels_are_cut():
    plot = coefficient_plot(ROWS)
    values = [float(label) for _, label in plot.ticks]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1 and len(values) >= 4
    step = steps.pop()
    assert round(step / 10 ** math.floor(math.log10(step)), 6) in {1, 2, 5}
    assert 0.0 in values
    first = plot.marks[0]
    assert len(first.label) == MAX_LABEL and first.label.endswith("…")
    assert first.full_label == ROWS[0][0]


def test_the_axis_has_a_title_below_its_tick_labels_inside_the_picture():
    plot = coefficient_plot(ROWS, axis_title="change in P(strict success)")
    assert plot.axis_title == "change in P(strict success)"
    assert plot.axis_y + 18 < plot.title_y < plot.height  # under the ticks, not cut off
