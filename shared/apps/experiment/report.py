"""comparison.md and the figures, drawn from comparison.json alone (`intraskill experiment
report DIR` redraws them): learning curves per arm with seed bands, test success with
intervals beside the paired differences against the A/A band, and each arm's bank size and
gate decisions per round."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from shared.runtime.noise_floor import comparison_label

SHORT_CURVE = 30  # curves with at most this many steps get a marker per step
FIGURES = {
    "curves": "figures/learning-curves.png",
    "test": "figures/test-success.png",
    "banks": "figures/banks.png",
}


def write_report(run_dir: Path) -> Path:
    comparison = json.loads((run_dir / "comparison.json").read_text())
    (run_dir / "figures").mkdir(exist_ok=True)
    learning_curves(comparison, run_dir / FIGURES["curves"])
    test_success(comparison, run_dir / FIGURES["test"])
    banks(comparison, run_dir / FIGURES["banks"])
    path = run_dir / "comparison.md"
    path.write_text(markdown(comparison))
    return path


def _pp(d: Mapping[str, float]) -> str:
    return f"{100 * d['estimate']:+.1f} pp [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"


def _rate(d: Mapping[str, float]) -> str:
    return f"{100 * d['estimate']:.1f} % [{100 * d['low']:.1f}, {100 * d['high']:.1f}]"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _reward(d: Mapping[str, float]) -> str:
    return f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def markdown(c: Mapping[str, Any]) -> str:
    boot = c["bootstrap"]
    lines = [f"# Experiment: {', '.join(c['arms'])}", ""]
    if c["policy_is_test_double"]:
        lines += [
            f"**Policy `{c['policy']}` is a TEST DOUBLE: these figures show the experiment's "
            "mechanics, never the method's result.**",
            "",
        ]
    lines += [
        f"Base config `{c['base_config']}`; {c['n_tasks']} test tasks, the same for every arm. "
        f"Rates: {boot['level']:.0%} Wilson intervals over the test tasks. Differences: "
        f"{boot['level']:.0%} task-paired {boot.get('interval', 'percentile')} bootstrap "
        f"({boot['resamples']:,} resamples; an arm's column is the {boot['arm_columns']}), "
        "with Holm-adjusted p-values over the table's contrasts. The intervals cover the test "
        "tasks' sampling, not training-seed variation: the per-seed values stand beside them.",
        "",
    ]
    lines += detectable(c)
    lines += [
        "## Arms",
        "",
    ]
    lines += _table(
        ["arm", "what it is", "initial bank", "seeds", "config fingerprint"],
        [
            [
                name,
                a["doc"],
                a["initial_bank"]
                + (f" (q = {a['initial_q']:g})" if a["initial_q"] is not None else ""),
                ", ".join(map(str, a["seeds"])),
                str(a["fingerprint"])[:12],
            ]
            for name, a in c["arms"].items()
        ],
    )
    lines += ["", "## Test success", ""]
    rows = [["base (bare)", "-", _rate(c["base"]["r_success"]), "-", "-"]]
    for name, a in c["arms"].items():
        bank, bare = a["test"]["bank"], a["test"]["bare"]
        same = sorted({name for name in bank["identical_to"] or [] if name})
        note = f" (evaluated once: the rollouts of {', '.join(same)})" if same else ""
        rows.append(
            [
                name,
                _rate(bank["r_success"]) + note,
                _rate(bare["r_success"]),
                ", ".join(f"{100 * v:.1f}" for v in bank["per_seed"]),
                f"{bank['r_strict']['estimate']:.3f}",
            ]
        )
    lines += _table(
        [
            "arm",
            "success with its final bank",
            "success bare",
            "per seed (bank, %)",
            "strict (bank)",
        ],
        rows,
    )
    lines += ["", "## Paired differences (a - b)", ""]
    notes: list[str] = []
    rows = []
    for row in c["comparisons"]:
        success, strict = row["differences"]["r_success"], row["differences"]["r_strict"]
        if success.get("note") and success["note"] not in notes:
            notes.append(success["note"])
        adjusted = row.get("adjusted")
        rows.append(
            [
                comparison_label(row),
                row["policy"],
                _pp(success) + ("*" if success.get("note") else ""),
                _pp(strict),
                _p(adjusted["r_success"]["p"]) if adjusted else "-",
                ("yes" if adjusted["r_success"]["reject"] else "no") if adjusted else "-",
                f"{100 * row['mde']['r_success']:.1f} pp" if row.get("mde") else "-",
                row["verdict"]["r_success"] if row.get("verdict") else _kind_words(row),
            ]
        )
    lines += _table(
        [
            "comparison", "policy", "success", "strict reward", "Holm p (success)",
            "survives Holm", "MDE (success)", "reading (success)",
        ],
        rows,
    )  # fmt: skip
    lines += [""] + [f"\\* {note}" for note in notes]
    lines += ["", "## Banks and gates per round", ""]
    rows = [
        [
            run["name"],
            r["round"],
            r["bank_size"],
            r["candidates"],
            r["gate_status"],
            r["next_bank_size"],
        ]
        for run in c["runs"]
        for r in run["rounds"]
    ]
    lines += _table(["run", "round", "bank size", "candidates", "gate", "next bank size"], rows)
    if c.get("confirmation"):
        lines += [
            "",
            "## Gate estimate vs confirmation (strict reward, final bank - bare)",
            "",
            "The gate estimate is the sum of the final bank's gate coefficients (additive main "
            "effects, on the validation tasks that selected them); the confirmation measures the "
            "same bank once on held-out validation tasks no gate used. A gate estimate above the "
            "confirmation is the selection bias of reusing validation tasks.",
            "",
        ]
        rows = [
            [
                r["run"],
                r["val_policy"],
                r["bank_size"],
                "-" if r["gate_estimate"] is None else f"{r['gate_estimate']:+.3f}",
                "-" if r["confirmation"] is None else _reward(r["confirmation"]),
                r["n_tasks"],
            ]
            for r in c["confirmation"]
        ]
        lines += _table(
            ["run", "val policy", "bank size", "gate estimate", "confirmation [95%]", "tasks"],
            rows,
        )
    lines += ["", "## Figures", ""] + [f"![{key}]({path})" for key, path in FIGURES.items()]
    return "\n".join(lines) + "\n"


def detectable(c: Mapping[str, Any]) -> list[str]:
    """What the experiment can detect, beside the effect it exists to see."""
    power, effect = c.get("power") or {}, c.get("effect_of_interest") or {}
    if not power.get("mde"):
        return []
    lines = ["## What this experiment can detect", ""]
    for metric, label in (("r_success", "success"), ("r_strict", "strict reward")):
        if metric not in power["mde"]:
            continue
        mde, wanted = power["mde"][metric], effect.get(metric)
        line = (
            f"- {label}: a true paired difference of {100 * mde:.1f} pp is found with "
            f"{power['power']:.0%} power at alpha {power['alpha']} "
            f"({100 * power['mde_holm_first_step'][metric]:.1f} pp at the first Holm step)"
        )
        if wanted is not None:
            line += f"; the effect of interest is {100 * wanted:.1f} pp: " + (
                "**cannot tell** an effect that small" if mde > wanted else "detectable"
            )
        lines.append(line + ".")
    lines += ["", f"Basis: {power['basis']}."]
    if effect.get("source"):
        lines += ["", f"Effect of interest: {effect['source']}."]
    return [*lines, ""]


def _kind_words(row: Mapping[str, Any]) -> str:
    if row["kind"] == "A/A":
        return "noise floor"
    if row["kind"] == "identical":
        return f"0 {row.get('identical') or 'by construction'}: one rollout"
    return "-"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def learning_curves(c: Mapping[str, Any], path: Path) -> None:
    """Training-rollout success per step: each arm's mean over seeds, the band min..max."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name in c["arms"]:
        curves = [[p["success"] for p in r["curve"]] for r in c["runs"] if r["arm"] == name]
        length = min(len(curve) for curve in curves)
        values = np.array(
            [[np.nan if v is None else v for v in curve[:length]] for curve in curves]
        )
        steps = np.arange(1, length + 1)
        marker = "o" if length <= SHORT_CURVE else None  # one step is a point, not a line
        ax.plot(
            steps, np.nanmean(values, axis=0), marker=marker, label=f"{name} ({len(curves)} seeds)"
        )
        ax.fill_between(steps, np.nanmin(values, axis=0), np.nanmax(values, axis=0), alpha=0.2)
    ax.set_xlabel("rollout step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("training rollout success")
    ax.set_title("Learning curves (band: min..max over seeds)")
    _save(plt, fig, ax, path, fontsize=8)


def test_success(c: Mapping[str, Any], path: Path) -> None:
    """Left: test success per arm, with its final bank and bare (Wilson intervals). Right: the
    paired differences (success) with their intervals, over the band of the widest A/A row."""
    plt = _plt()
    names = list(c["arms"])
    rows = c["comparisons"]
    fig, (ax, diff) = plt.subplots(
        1, 2, figsize=(max(13, 1.4 * len(names) + 9), 5), gridspec_kw={"width_ratios": [1, 1.2]}
    )
    for offset, which in ((-0.2, "bank"), (0.2, "bare")):
        stats = [c["arms"][n]["test"][which]["r_success"] for n in names]
        est = np.array([s["estimate"] for s in stats])
        err = [est - [s["low"] for s in stats], [s["high"] for s in stats] - est]
        ax.bar(np.arange(len(names)) + offset, est, 0.4, yerr=err, capsize=3, label=which)
    ax.axhline(c["base"]["r_success"]["estimate"], color="k", ls="--", lw=1, label="base (bare)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel(f"test success ({c['n_tasks']} tasks)")
    title = "Test success, 95% Wilson"
    ax.set_title(title + (" (TEST DOUBLE policy)" if c["policy_is_test_double"] else ""))
    ax.legend(fontsize=8)
    differences(diff, rows)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _short_label(row: Mapping[str, Any]) -> str:
    if row["kind"] == "A/A":
        return f"A/A: {row['b']} [{row['policy']}]"
    if row["kind"] == "identical":
        return f"{row['a']} - {row['b']} [{row['policy']}] (identical {row.get('identical', '')})"
    return f"{row['a']} - {row['b']} [{row['policy']}]"


def differences(ax, rows) -> None:
    """Each row's paired success difference (pp) with its interval; grey: A/A rows, hollow:
    identical rows; the band spans the widest A/A interval, the noise floor."""
    aa = [r["differences"]["r_success"] for r in rows if r["kind"] == "A/A"]
    if aa:
        low, high = min(d["low"] for d in aa), max(d["high"] for d in aa)
        ax.axvspan(100 * low, 100 * high, color="0.85", label="A/A band (noise floor)")
    ax.axvline(0, color="k", lw=0.8)
    for y, row in enumerate(rows):
        d = row["differences"]["r_success"]
        color = "0.4" if row["kind"] == "A/A" else "C3"
        ax.errorbar(
            100 * d["estimate"], y,
            xerr=[[100 * (d["estimate"] - d["low"])], [100 * (d["high"] - d["estimate"])]],
            fmt="o", color=color, capsize=3,
            mfc="none" if row["kind"] == "identical" else color,
        )  # fmt: skip
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short_label(r) for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("paired difference in test success (pp, 95% bootstrap)")
    ax.set_title("Differences a - b against the A/A band")
    if aa:
        ax.legend(fontsize=7, loc="lower right")


def banks(c: Mapping[str, Any], path: Path) -> None:
    """Bank size after each round's gate, per run; filled marker: the gate adopted a new bank."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = {name: f"C{i}" for i, name in enumerate(c["arms"])}
    for run in c["runs"]:
        rounds = run["rounds"]
        xs = [0] + [r["round"] + 1 for r in rounds]
        ys = [rounds[0]["bank_size"]] + [r["next_bank_size"] for r in rounds]
        ax.plot(
            xs, ys, color=colors[run["arm"]], alpha=0.7, label=f"{run['arm']} s{run['seed_index']}"
        )
        for r in rounds:
            ax.scatter(
                r["round"] + 1,
                r["next_bank_size"],
                color=colors[run["arm"]],
                facecolors=colors[run["arm"]] if r["adopted"] else "none",
            )
    ax.set_xlabel("gate (after round)")
    ax.set_ylabel("chunks in the bank")
    ax.set_title("Bank size per round (filled: a new bank adopted)")
    _save(plt, fig, ax, path, fontsize=7, ncol=2)


def _save(plt, fig, ax, path: Path, **legend: Any) -> None:
    """Every figure's ending: its legend, a tight layout, the PNG, the figure closed."""
    ax.legend(**legend)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
