"""The report's figures as PNG files (matplotlib, headless). Each function writes one file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import font_manager
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from shared.apps.report import reference
from shared.apps.report.data import ChunkTrack, series

DPI = 110
# Chunk titles may be Chinese (the reference bank is): use a CJK font when the machine has one,
# as a fallback after the default; without one, figures name such chunks by their slug instead.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "Droid Sans Fallback", "SimHei", "Microsoft YaHei")  # fmt: skip
_INSTALLED = {font.name for font in font_manager.fontManager.ttflist}
HAS_CJK_FONT = any(name in _INSTALLED for name in CJK_FONTS)
plt.rcParams["font.family"] = ["DejaVu Sans", *(n for n in CJK_FONTS if n in _INSTALLED)]


def drawable(text: str) -> bool:
    """False when the text needs CJK glyphs this machine has no font for."""
    return HAS_CJK_FONT or all(ord(ch) < 0x2E80 for ch in text)


STATUS_COLORS = {
    "selected": "#2e7d32",
    "retired": "#c62828",
    "rewrite_loser": "#ef6c00",
    "non_positive": "#757575",
    "budget_excluded": "#6a1b9a",
    "below_bound": "#1565c0",
}
CHANGE_MARKS = {"added": "+", "rewritten": "R", "kept": "", "retired": "x retired"}

# (panel title, y label, [(legend label, metric names to try in order)])
TRAINING_PANELS: tuple[tuple[str, str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    ("Reward and success (all generated groups)", "mean", (
        ("strict reward", ("reward", "reward_mean", "strict", "r_strict")),
        ("success", ("success", "success_rate", "r_success")),
    )),
    ("All-wrong groups", "share of groups", (
        ("all-wrong rate", ("all_wrong_rate", "all_wrong_group_rate")),
    )),
    ("Treatments", "share of groups", (
        ("skill-free", ("skill_free_rate", "skill_free_group_rate")),
        ("assisted, empty mask", ("assisted_empty_rate", "assisted_empty_group_rate")),
    )),
    ("Dynamic-filter drops", "groups per step", (
        ("technical", ("dropped_technical", "technical_drops", "technical_drop_count")),
        ("zero-variance", ("dropped_zero_variance", "zero_variance_drops",
                           "zero_std_drop_count")),
    )),
    ("Episodes per step", "episodes", (
        ("generated", ("episodes_generated",)),
        ("admitted", ("episodes_admitted",)),
    )),
    ("Update", "value", (
        ("loss", ("loss",)),
        ("clip fraction", ("clip_fraction",)),
    )),
)  # fmt: skip


def _save(figure: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # every figure already ran tight_layout; bbox_inches="tight" would draw it a second time
    figure.savefig(path, dpi=DPI, facecolor="white")
    plt.close(figure)
    return path


def training_curves(metrics: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """One panel per training signal against the global rollout step; gates as dashed lines."""
    if not metrics:
        return None
    steps = series(metrics, ("global_step", "step")) or list(range(1, len(metrics) + 1))
    rounds = series(metrics, ("round",))
    panels = [
        (title, ylabel, [(label, v) for label, names in lines if (v := series(metrics, names))])
        for title, ylabel, lines in TRAINING_PANELS
    ]
    panels = [p for p in panels if p[2]]
    columns = 2 if len(panels) > 1 else 1
    rows = -(-len(panels) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(12, 3.4 * rows), squeeze=False)
    x = np.asarray(steps, dtype=float)
    boundaries = _round_boundaries(x, rounds)
    for axis, (title, ylabel, lines) in zip(axes.flat, panels, strict=False):
        for label, values in lines:
            axis.plot(x, values, marker="o", markersize=3, linewidth=1.6, label=label)
        for boundary in boundaries:
            axis.axvline(boundary, color="#999999", linestyle="--", linewidth=0.9)
        axis.set_title(title, fontsize=11)
        axis.set_xlabel("rollout step")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=9, loc="best")
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    figure.suptitle("Training (dashed lines: gates between rounds)", fontsize=13)
    figure.tight_layout()
    return _save(figure, path)


def _round_boundaries(steps: np.ndarray, rounds: Sequence[float] | None) -> list[float]:
    if not rounds:
        return []
    return [
        (steps[i - 1] + steps[i]) / 2 for i in range(1, len(rounds)) if rounds[i] != rounds[i - 1]
    ]


def gate_coefficients(gate: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], path: Path):
    """Strict-reward coefficient per pool column with its HC3 95% interval, coloured by status."""
    height = max(2.8, 0.42 * len(rows) + 1.6)
    figure, axis = plt.subplots(figsize=(10, height))
    y = np.arange(len(rows))[::-1]
    for position, row in zip(y, rows, strict=True):
        color = STATUS_COLORS.get(row["status"], "#000000")
        value = row["coefficient"]
        if row["ci_low"] is not None and row["ci_high"] is not None:
            axis.plot([row["ci_low"], row["ci_high"]], [position, position], color=color, lw=2)
        axis.plot(value, position, "o", color=color, markersize=8)
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(y, [_column_label(r) for r in rows], fontsize=9)
    axis.set_xlabel("coefficient on the strict reward (paired delta OLS, no intercept)")
    decision = gate["decision"]
    state = "provisional" if decision.get("provisional") else gate.get("status", "")
    axis.set_title(
        f"Gate {gate['id']} ({gate['kind']}, round {gate['round']}, {state}): "
        f"{decision['n_observations']} paired tasks, lines = HC3 95% intervals",
        fontsize=11,
    )
    axis.grid(axis="x", alpha=0.3)
    present = {r["status"] for r in rows}
    handles = [
        Line2D([], [], marker="o", linestyle="-", color=c, label=s)
        for s, c in STATUS_COLORS.items()
        if s in present
    ]
    axis.legend(handles=handles, fontsize=9, loc="lower right")
    figure.tight_layout()
    return _save(figure, path)


def _column_label(row: Mapping[str, Any]) -> str:
    """A chunk's title when known (slugs can be hashes), with version and pool kind."""
    version = row["label"].rsplit(" ", 1)[-1]
    title = row.get("title")
    name = _short(title, 44) if title and drawable(title) else row["label"].rsplit(" ", 1)[0]
    return f"{name} {version} ({row['kind']})"


def bank_lineage(
    banks: Sequence[Mapping[str, Any]], tracks: Sequence[ChunkTrack], path: Path
) -> Path | None:
    """Chunks (rows) across banks (columns): colour = rho; + added, R rewritten, x retired."""
    if not banks or not tracks:
        return None
    grid = np.full((len(tracks), len(banks)), np.nan)
    for row, track in enumerate(tracks):
        for column, cell in enumerate(track.cells):
            if cell is not None:
                grid[row, column] = cell["rho"]
    width = max(7.0, 1.6 * len(banks) + 5)
    figure, axis = plt.subplots(figsize=(width, max(3.0, 0.45 * len(tracks) + 1.8)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#f2f2f2")
    image = axis.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.2, vmax=0.9, aspect="auto")
    for row, track in enumerate(tracks):
        for column, cell in enumerate(track.cells):
            change = track.change(column)
            text = CHANGE_MARKS.get(change, "")
            if cell is not None:
                text = f"{text} v{cell['version']}\nρ {cell['rho']:.2f}".strip()
            if text:
                dark = cell is not None and cell["rho"] < 0.6
                color = "#c62828" if change == "retired" else ("white" if dark else "black")
                weight = "bold" if change == "retired" else "normal"
                axis.text(
                    column,
                    row,
                    text,
                    ha="center",
                    va="center",
                    fontsize=8.5,
                    color=color,
                    fontweight=weight,
                )
    axis.set_xticks(
        range(len(banks)),
        [f"S{i}\nbank {b['id']} (round {b['round']})" for i, b in enumerate(banks)],
    )
    names = [_short(t.title, 44) if t.title and drawable(t.title) else t.slug for t in tracks]
    axis.set_yticks(range(len(tracks)), names, fontsize=9)
    axis.set_title("Bank lineage: + added, R rewritten, x retired; colour = inclusion rho")
    figure.colorbar(image, ax=axis, label="rho", shrink=0.8)
    figure.tight_layout()
    return _save(figure, path)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def funnel_chart(funnel: Mapping[int, Mapping[str, int]], path: Path) -> Path | None:
    """The slow-loop funnel per round, this run beside the reference run (two panels)."""
    if not funnel:
        return None
    stages = ("all_wrong_groups", "failed_retries", "cards", "eligible", "candidates")
    labels = ("all-wrong", "failed retries", "cards", "eligible", "candidates")
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    for axis, data, title in (
        (axes[0], funnel, "This run"),
        (axes[1], reference.FUNNEL, "Reference run (released figures)"),
    ):
        rounds = sorted(data)
        width = 0.8 / len(stages)
        for index, (stage, label) in enumerate(zip(stages, labels, strict=True)):
            offsets = np.arange(len(rounds)) + (index - len(stages) / 2 + 0.5) * width
            values = [data[r].get(stage, 0) for r in rounds]
            bars = axis.bar(offsets, values, width, label=label)
            axis.bar_label(bars, fontsize=7, padding=1)
        axis.set_xticks(range(len(rounds)), [f"round {r}" for r in rounds])
        axis.set_title(title, fontsize=11)
        axis.set_ylabel("count")
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle("Slow-loop funnel per round", fontsize=13)
    figure.tight_layout()
    return _save(figure, path)


def test_success(rows: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """Test success per condition with its 95% interval, reference run's success beside it."""
    if not rows:
        return None
    figure, axis = plt.subplots(figsize=(9, 4))
    x = np.arange(len(rows))
    values = [r["success"] for r in rows]
    axis.bar(x - 0.2, values, 0.4, color="#1565c0", label="this run")
    for position, row in zip(x, rows, strict=True):
        top = row["success"]
        if row.get("success_ci"):
            low, top = row["success_ci"]
            axis.plot([position - 0.2] * 2, [low, top], color="black", linewidth=1.5)
        # the label sits above the interval, so the two never overlap
        axis.text(position - 0.2, top + 0.015, f"{row['success']:.0%}", ha="center", fontsize=9)
    ref = [reference.TEST.get(r["condition"], (np.nan, np.nan))[1] for r in rows]
    ref_bars = axis.bar(x + 0.2, ref, 0.4, color="#bdbdbd", label="reference run")
    axis.bar_label(ref_bars, labels=[f"{v:.0%}" for v in ref], fontsize=9, padding=2)
    axis.set_xticks(x, [r["condition"] for r in rows])
    axis.set_ylim(0, 1.1)
    axis.set_ylabel("test success (black: 95% interval)")
    axis.set_title("Test set: four conditions, one rollout per task each", fontsize=11)
    axis.legend(fontsize=9, loc="upper left")
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return _save(figure, path)
