"""`evidence.json`: what one experiment folder shows about the skill side, in one small file.

Built from the folder and its registry after each phase (so a run stopped half-way still says
what it has measured so far): the cards and their paired verification, Gate A's coefficients
with their HC3 intervals, the size of S_0, the four test conditions with Wilson intervals, the
A/A row, the minimum detectable effect of the test design and a plain verdict.

Schema (`intraskill-evidence-v1`): {"cards": {"total", "verified", "verified_cards": [{"id",
"with", "without", "k"}]}, "gate_a": {"n_tasks", "rows": [{"chunk", "coefficient", "ci_low",
"ci_high", "admitted"}]}, "s0_size", "test": {"n_tasks", "samples", "rows": [{"condition",
"estimate", "ci_low", "ci_high"}]}, "aa": {"estimate", "ci_low", "ci_high"}, "mde_pp",
"verdict"}, plus "contrasts" and "phases_done". Parts not measured yet are null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shared.apps.experiment.samples import pool_samples
from shared.apps.experiment.stats import ALPHA, POWER, mde, paired_se, wilson
from shared.runtime.paired_bootstrap import Metric, derived_seed, paired_bootstrap

EVIDENCE_SCHEMA = "intraskill-evidence-v1"
PRIMARY = "r_strict"  # what gates fit and admit on
SUCCESS = Metric("r_success", "r_success")
EFFECT_OF_INTEREST_PP = 10.0  # a null result counts when the design could have seen this
# The test's four conditions under the experiment's names (the reference arm's first seed).
TEST_CONDITIONS = {
    "base/bare": "base/bare",
    "base/S_0": "base/s0",
    "trained/bare": "{arm}/s0/bare",
    "trained/S_T": "{arm}/s0/bank",
}
CONTRASTS = (
    ("trained/S_T", "base/bare", "the whole system against the start"),
    ("base/S_0", "base/bare", "S_0's text at the start checkpoint"),
    ("trained/S_T", "trained/bare", "the final bank's text at the trained checkpoint"),
    ("trained/bare", "base/bare", "what training put in the weights"),
)

# The first of these with a variance gives mde_pp; without one, the A/A row's noise does.
MDE_CONTRASTS = ("trained/S_T - base/bare", "base/S_0 - base/bare")


def card_evidence(cards: Iterable[Any]) -> dict[str, Any]:
    """Every card of the run; verified ones with their paired counts."""
    cards = list(cards)
    verified = []
    for card in cards:
        check = (card.extras or {}).get("verification") or {}
        if check.get("verified"):
            verified.append(
                {"id": card.id, "with": check["with"], "without": check["without"], "k": check["k"]}
            )
    checked = sum(bool((card.extras or {}).get("verification")) for card in cards)
    return {
        "total": len(cards),
        "checked": checked,
        "verified": len(verified),
        "verified_cards": verified,
    }


def gate_a_evidence(gate: Any, decision: Any | None) -> dict[str, Any]:
    """Gate A's rows on the primary reward: coefficient, HC3 95 % interval, admitted."""
    rows = []
    for row in decision.rows if decision else []:
        rows.append(
            {
                "chunk": f"{row.slug}@{row.version}",
                "coefficient": row.coefficients.get(PRIMARY),
                "ci_low": (row.ci_low or {}).get(PRIMARY),
                "ci_high": (row.ci_high or {}).get(PRIMARY),
                "admitted": str(row.status) == "selected",
            }
        )
    return {
        "n_tasks": gate.n_tasks,
        "status": str(gate.status),
        "provisional": bool(decision and decision.provisional),
        "rows": rows,
    }


def test_rows(
    columns: Mapping[str, Mapping[str, Sequence[float]]], names: Mapping[str, str], samples: int = 1
):
    """Each condition's success rate over its tasks x samples episodes, Wilson interval (a
    task's samples are correlated, so with several it is a little narrow; the contrasts use
    the task-paired bootstrap)."""
    rows = []
    for label, name in names.items():
        if name not in columns:
            continue
        values = np.asarray(columns[name]["r_success"], dtype=float)
        interval = wilson(float(values.mean()), len(values) * samples)
        rows.append(
            {
                "condition": label,
                "estimate": interval["estimate"],
                "ci_low": interval["low"],
                "ci_high": interval["high"],
            }
        )
    return rows


def paired_mde_pp(differences: np.ndarray) -> float | None:
    """Smallest paired difference (pp) a two-sided level-ALPHA test detects with POWER, from the
    observed per-task variance of the differences (`stats.mde`, the experiment's own rule).
    None when there is no variance to read: fewer than two tasks, or every difference zero
    (identical columns say nothing about the noise a real difference would meet)."""
    if len(differences) < 2 or not differences.any():
        return None
    se = paired_se(float(np.var(differences, ddof=1)), len(differences))
    return 100 * mde(se, alpha=ALPHA, power=POWER)


def contrast(columns, a: str, b: str, identical: bool = False) -> dict[str, Any]:
    """Paired difference a - b per task; `identical`: the evaluator rolled them out once (the
    same checkpoint and chunks), so the row compares nothing and carries no power."""
    if identical:
        return {"identical": "by construction", "estimate_pp": 0.0, "ci_low_pp": 0.0,
                "ci_high_pp": 0.0, "all_differences_zero": True, "mde_pp": None}  # fmt: skip
    left = {key: np.asarray(value, dtype=float) for key, value in columns[a].items()}
    right = {key: np.asarray(value, dtype=float) for key, value in columns[b].items()}
    interval = paired_bootstrap(left, right, SUCCESS, seed=derived_seed(0, a, b, "evidence"))
    differences = left["r_success"] - right["r_success"]
    return {
        "estimate_pp": 100 * interval["estimate"],
        "ci_low_pp": 100 * interval["low"],
        "ci_high_pp": 100 * interval["high"],
        "all_differences_zero": bool(not differences.any()),
        "mde_pp": paired_mde_pp(differences),
    }


def reading(row: Mapping[str, Any]) -> str:
    """A contrast in words: a difference, no effect as large as the one of interest, or unknown."""
    if row.get("identical"):
        return "identical by construction (one rollout under both names): nothing to compare"
    low, high = row["ci_low_pp"], row["ci_high_pp"]
    if low > 0:
        return f"helps: {row['estimate_pp']:+.1f} pp [{low:+.1f}, {high:+.1f}]"
    if high < 0:
        return f"hurts: {row['estimate_pp']:+.1f} pp [{low:+.1f}, {high:+.1f}]"
    if max(-low, high) < EFFECT_OF_INTEREST_PP:
        return (
            f"no effect of {EFFECT_OF_INTEREST_PP:.0f} pp or more: {row['estimate_pp']:+.1f} pp "
            f"[{low:+.1f}, {high:+.1f}]"
        )
    return (
        f"cannot tell: {row['estimate_pp']:+.1f} pp [{low:+.1f}, {high:+.1f}] is wider than "
        f"±{EFFECT_OF_INTEREST_PP:.0f} pp"
    )


def build_evidence(
    *,
    cards: Iterable[Any],
    gate_a: dict[str, Any] | None,
    s0_size: int | None,
    evaluation: Mapping[str, Any] | None,
    arm: str,
    phases_done: Sequence[str],
) -> dict[str, Any]:
    """The evidence document from what the run has measured so far."""
    names = {label: name.format(arm=arm) for label, name in TEST_CONDITIONS.items()}
    evidence: dict[str, Any] = {
        "schema": EVIDENCE_SCHEMA,
        "phases_done": list(phases_done),
        "cards": card_evidence(cards),
        "gate_a": gate_a,
        "s0_size": s0_size,
        "test": None,
        "aa": None,
        "contrasts": None,
        "mde_pp": None,
        "mde_contrast": None,
    }
    if evaluation:
        evaluation = pool_samples(evaluation)  # a task's column: the mean of its samples
        columns, samples = evaluation["per_task"]["columns"], evaluation["samples"]
        evidence["test"] = {
            "n_tasks": evaluation["n_tasks"],
            "samples": samples,
            "rows": test_rows(columns, names, samples),
        }
        # The A/A row of the final bank's condition (the reference run's), else any A/A row;
        # its interval from the pooled columns like every contrast's (the evaluator's own row
        # read its first sample only).
        rows = [c for c in evaluation["comparisons"] if c.get("kind") == "A/A"]
        aa = next((c for c in rows if c["b"] == names["trained/S_T"]), rows[0] if rows else None)
        if aa and aa["a"] in columns and aa["b"] in columns:
            row = contrast(columns, aa["a"], aa["b"])
            evidence["aa"] = {
                "estimate": row["estimate_pp"] / 100, "ci_low": row["ci_low_pp"] / 100,
                "ci_high": row["ci_high_pp"] / 100, "conditions": [aa["a"], aa["b"]],
            }  # fmt: skip
        conditions = evaluation.get("conditions", {})
        evidence["contrasts"] = {
            f"{a} - {b}": {
                "meaning": meaning,
                **contrast(columns, names[a], names[b], same(conditions, names[a], names[b])),
            }
            for a, b, meaning in CONTRASTS
            if names[a] in columns and names[b] in columns
        }
        evidence["mde_pp"], evidence["mde_contrast"] = design_power(
            evidence["contrasts"], columns, aa
        )
    evidence["verdict"] = verdict(evidence)
    return evidence


def same(conditions: Mapping[str, Any], a: str, b: str) -> bool:
    """The evaluator labelled one condition the other's rollouts (`identical_to`)."""
    return conditions.get(a, {}).get("identical_to") == b or (
        conditions.get(b, {}).get("identical_to") == a
    )


def design_power(contrasts, columns, aa) -> tuple[float | None, str | None]:
    """The test design's MDE and the contrast it comes from: the main contrast; before training
    ends, S_0's at the start checkpoint (same tasks, same test: the per-task variance it would
    have); when neither has a variance (S_0 empty: identical by construction), the A/A row's,
    two independent draws of one policy on the same tasks: the noise any contrast meets."""
    for name in MDE_CONTRASTS:
        if (row := contrasts.get(name)) and row["mde_pp"] is not None:
            return row["mde_pp"], name
    if aa and aa["a"] in columns and aa["b"] in columns:
        differences = np.asarray(columns[aa["a"]]["r_success"], dtype=float) - np.asarray(
            columns[aa["b"]]["r_success"], dtype=float
        )
        if (value := paired_mde_pp(differences)) is not None:
            return value, f"A/A: {aa['a']} - {aa['b']}"
    return None, None


def verdict(evidence: Mapping[str, Any]) -> str:
    """What the run shows, in plain words, from the figures alone."""
    cards = evidence["cards"]
    parts = [
        f"{cards['verified']} of {cards['total']} cards verified by the paired check "
        f"(more successes with the repair than without, on the same seeds)."
    ]
    gate = evidence.get("gate_a")
    if gate:
        kept = sum(row["admitted"] for row in gate["rows"])
        parts.append(
            f"Gate A on {gate['n_tasks']} tasks ({gate['status']}) kept {kept} of "
            f"{len(gate['rows'])} drafts; S_0 has {evidence.get('s0_size') or 0} chunks."
        )
    contrasts = evidence.get("contrasts")
    if not contrasts:
        parts.append("The test has not run yet: no statement about success.")
        return " ".join(parts)
    for name, row in contrasts.items():
        parts.append(f"{name} ({row['meaning']}): {reading(row)}.")
    if not any(row["condition"] == "trained/S_T" for row in evidence["test"]["rows"]):
        parts.append("Training has not finished: the trained conditions are not measured yet.")
    mde = evidence.get("mde_pp")
    if mde is not None:
        power = "could" if mde <= EFFECT_OF_INTEREST_PP else "could NOT"
        test = evidence["test"]
        parts.append(
            f"The test design ({test['n_tasks']} tasks x {test['samples']} samples) detects"
            f" {mde:.1f} pp at 80 % power: it {power} have seen "
            f"{EFFECT_OF_INTEREST_PP:.0f} pp ({evidence['mde_contrast']})."
        )
    else:
        parts.append("The test design's power is unknown: no contrast or A/A row has a variance.")
    return " ".join(parts)
