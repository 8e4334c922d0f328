"""The evaluation's figure: condition means and the comparisons' intervals."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def plot_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Condition means (strict, success) and comparison intervals for the main metrics."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    plot_condition_means(axes[0], report)
    plot_comparisons(axes[1], report)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_condition_means(ax, report: Mapping[str, Any]) -> None:
    """Strict reward and success per condition, side by side."""
    names = list(report["conditions"])
    width = 0.38
    for offset, metric in ((-width / 2, "r_strict"), (width / 2, "r_success")):
        values = [report["conditions"][n]["metrics"].get(metric, np.nan) for n in names]
        ax.bar(np.arange(len(names)) + offset, values, width, label=metric)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylim(0, 1)
    ax.set_title(f"Test split, {report['n_tasks']} tasks")
    ax.legend()


def plot_comparisons(ax, report: Mapping[str, Any]) -> None:
    """Each comparison's paired difference and interval on the three main rewards."""
    shown = ("r_strict", "r_success", "r_loose")
    labels, estimates, lows, highs = [], [], [], []
    for comparison in report["comparisons"]:
        for metric in shown:
            d = comparison["differences"][metric]
            labels.append(f"{comparison['a']} - {comparison['b']}: {metric}")
            estimates.append(d["estimate"])
            lows.append(d["estimate"] - d["low"])
            highs.append(d["high"] - d["estimate"])
    ys = np.arange(len(labels))[::-1]
    ax.errorbar(estimates, ys, xerr=[lows, highs], fmt="o", capsize=3)
    ax.axvline(0, color="k", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    level = report["bootstrap"]["level"]
    ax.set_title(
        f"Paired differences, {level:.0%} bootstrap ({report['bootstrap']['resamples']:,})"
    )
