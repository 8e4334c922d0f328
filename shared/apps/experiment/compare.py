"""The arms compared, paired by task: what `comparison.json` holds (pure, given the files).

Each arm's test success is the mean over its seeds of its runs' per-task outcomes, so arm A and
arm B are compared on the same tasks (`shared.runtime.paired_bootstrap`, the evaluator's own
interval: tasks are resampled, the same resampled tasks enter both sides, percentile interval). The
interval covers the test tasks' sampling, not training-seed variation: the per-seed figures are
listed beside it, and the MDE adds the seeds' variance when there are two or more.

What each row carries besides its interval (`shared.apps.experiment.stats`): single rates get the
Wilson interval; every contrast its MDE at 80 % power, its Holm-adjusted p-value within the
table's family of contrasts (per metric) and a verdict in words against the effect of interest;
A/A rows (one per arm, its seeds pooled, and one bare: the base policy) are the noise floor;
"identical" rows say whether the two sides are one run by construction (same config, bank and
seed: the same weights by design) or by outcome (different runs whose weights happened to match).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared.apps.experiment import stats
from shared.contracts.hashing import content_hash
from shared.runtime.noise_floor import AA_SUFFIX
from shared.runtime.paired_bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Metric,
    derived_seed,
    paired_bootstrap,
)

METRICS = (Metric("r_success", "r_success"), Metric("r_strict", "r_strict"))
POLICIES = ("bank", "bare")  # each final checkpoint with its final bank, and without any
# The effect the experiment exists to see: the reference's inference-time gain of its final
# bank over the same checkpoint bare (+S_t over Iter80 free on its 400 test tasks).
EFFECT_OF_INTEREST = {
    "r_success": 0.02,
    "r_strict": 0.017,
    "source": "the reference's +S_t over Iter80 free: +2.00 pp success [-0.50, +4.75], "
    "strict 0.8671 - 0.8501 (docs/experiments.md, 'The effect of interest')",
}


def rolled_out_as(test: Mapping[str, Any], name: str) -> str:
    """The test condition whose rollouts `name` reports (itself unless it is identical to one)."""
    return test["conditions"][name].get("identical_to") or name


def arm_fingerprint(config: Mapping[str, Any], initial_bank_hash: str | None) -> str:
    """What the arm is, whatever the seed: its effective config without the run's seed and
    alias, and the content hash of the bank it starts from (grpo and fixed-s0 share a config
    and differ only there)."""
    shared = {key: value for key, value in config.items() if key != "seed"}
    shared["gate"] = {k: v for k, v in (config.get("gate") or {}).items() if k != "alias"}
    return content_hash({"config": shared, "initial_bank_hash": initial_bank_hash})


def run_facts(spec, record: Mapping[str, Any], folder: Path, registry) -> dict[str, Any]:
    """One run's facts for the comparison: effective config, curve, banks and gates per round."""
    from shared.apps.report.data import read_metrics

    sizes: dict[int, int] = {}

    def size(bank_id: int | None) -> int | None:
        if bank_id is None:
            return None
        if bank_id not in sizes:
            sizes[bank_id] = len(registry.get_bank(bank_id).entries)
        return sizes[bank_id]

    rounds = [
        {
            "round": r["round"],
            "bank_id": r.get("bank_id"),
            "bank_size": size(r.get("bank_id")),
            "candidates": len(r.get("candidate_ids") or []),
            "gate_status": r.get("gate_status"),
            "adopted": bool(r.get("adopted")),
            "next_bank_id": r.get("next_bank_id"),
            "next_bank_size": size(r.get("next_bank_id")),
        }
        for r in record["rounds"]
    ]
    final_bank = rounds[-1]["next_bank_id"] or rounds[-1]["bank_id"]
    coefficients = [e.coefficient for e in registry.get_bank(final_bank).entries]
    curve = [
        {k: line.get(k) for k in ("step", "round", "success", "strict", "reward")}
        for line in read_metrics(folder / "train" / "metrics.jsonl")
    ]
    return {
        "name": spec.name,
        "arm": spec.arm.name,
        "seed_index": spec.index,
        "seed": spec.seed,
        "conditions": {"bank": spec.bank, "bare": spec.bare},
        "effective_config": record["config"],
        "initial_bank_hash": record["rounds"][0].get("bank_hash"),
        "fingerprint": arm_fingerprint(record["config"], record["rounds"][0].get("bank_hash")),
        "final": {
            "checkpoint_id": record["rounds"][-1]["checkpoint_id"],
            "bank_id": final_bank,
            "bank_size": size(final_bank),
            # the gates' additive estimate of the whole bank's effect on the strict reward
            "gate_estimate": sum(coefficients)
            if all(c is not None for c in coefficients)
            else None,
        },
        "rounds": rounds,
        "curve": curve,
    }


def task_columns(report: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    columns = report["per_task"]["columns"]
    return {
        name: {k: np.asarray(v, dtype=float) for k, v in c.items()} for name, c in columns.items()
    }


def pooled(columns: Mapping[str, Mapping[str, np.ndarray]], names: Sequence[str]):
    """Per task, the mean over `names` (an arm's seeds) of every field."""
    fields = columns[names[0]].keys()
    return {f: np.mean([columns[n][f] for n in names], axis=0) for f in fields}


def level(columns: Mapping[str, np.ndarray], metric: Metric) -> dict[str, float]:
    """A condition's mean with its Wilson interval over the test tasks."""
    values = columns[metric.numerator]
    return stats.wilson(float(values.mean()), len(values))


def build_comparison(
    *,
    arms: Sequence,
    runs: Sequence[Mapping[str, Any]],
    test: Mapping[str, Any],
    confirm: Mapping[str, Any] | None,
    policy: str,
    base_config: str,
) -> dict[str, Any]:
    columns = task_columns(test)
    by_arm = {arm.name: [r for r in runs if r["arm"] == arm.name] for arm in arms}
    result: dict[str, Any] = {
        "policy": policy,
        "policy_is_test_double": policy != "model",
        "base_config": base_config,
        "n_tasks": test["n_tasks"],
        "samples": test.get("samples", 1),
        "bootstrap": {
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "level": 0.95,
            "interval": "percentile",
            "paired_by": "task",
            "arm_columns": "per-task mean over the arm's seeds (and each run's samples)",
        },
        "rates": {"interval": "wilson", "n": "test tasks", "level": 0.95},
        "effect_of_interest": EFFECT_OF_INTEREST,
        "base": {m.name: level(columns["base/bare"], m) for m in METRICS},
        "arms": {},
        "comparisons": [],
        "runs": list(runs),
    }
    for arm in arms:
        result["arms"][arm.name] = arm_entry(arm, by_arm[arm.name], test, columns)
    reference = arms[0]
    for other in arms[1:]:
        for which in POLICIES:
            result["comparisons"].append(
                arm_contrast(reference, other, which, by_arm, test, columns)
            )
    result["comparisons"] += aa_rows(arms, by_arm, columns)
    result["power"] = adjust_and_power(result["comparisons"], n_tasks=test["n_tasks"])
    if confirm is not None:
        result["confirmation"] = confirmation_rows(runs, confirm)
    return result


def arm_entry(arm, members, test, columns) -> dict[str, Any]:
    fingerprints = sorted({r["fingerprint"] for r in members})
    entry = {
        "doc": arm.doc,
        "overrides": arm.overrides,
        "initial_bank": arm.initial_bank,
        "initial_q": arm.q,
        "fingerprint": fingerprints[0] if len(fingerprints) == 1 else fingerprints,
        "initial_bank_hash": members[0].get("initial_bank_hash"),
        "effective_config": {
            k: v for k, v in members[0]["effective_config"].items() if k != "seed"
        },
        "seeds": [r["seed"] for r in members],
        "test": {},
    }
    for which in POLICIES:
        names = [r["conditions"][which] for r in members]
        identical = [test["conditions"][n].get("identical_to") for n in names]
        entry["test"][which] = {m.name: level(pooled(columns, names), m) for m in METRICS} | {
            "per_seed": [test["conditions"][n]["metrics"]["r_success"] for n in names],
            "identical_to": identical if any(identical) else None,
        }
    return entry


def arm_contrast(reference, other, which, by_arm, test, columns) -> dict[str, Any]:
    """reference - other with one policy (bank or bare): a contrast, or identical when every
    seed of both was rolled out as one condition."""
    names_a = [r["conditions"][which] for r in by_arm[reference.name]]
    names_b = [r["conditions"][which] for r in by_arm[other.name]]
    a, b = pooled(columns, names_a), pooled(columns, names_b)
    one = [rolled_out_as(test, n) for n in names_a] == [rolled_out_as(test, n) for n in names_b]
    row: dict[str, Any] = {
        "a": reference.name,
        "b": other.name,
        "policy": which,
        "kind": "identical" if one else "contrast",
        "differences": {
            m.name: paired_bootstrap(
                a,
                b,
                m,
                seed=derived_seed(BOOTSTRAP_SEED, reference.name, other.name, which, m.name),
            )
            for m in METRICS
        },
        "variance": {
            m.name: {
                "task": float(np.var(a[m.numerator] - b[m.numerator], ddof=1)),
                "seed": _seed_variance(columns, names_a, names_b, m),
                "seeds": min(len(names_a), len(names_b)),
            }
            for m in METRICS
        },
    }
    if one:
        row["identical"] = identical_reason(by_arm[reference.name], by_arm[other.name])
    return row


def identical_reason(runs_a, runs_b) -> str:
    """By construction: the two arms are one config and one initial bank, so with one seed the
    same run by design. By outcome: different arms whose final weights happened to match."""
    same = [r["fingerprint"] for r in runs_a] == [r["fingerprint"] for r in runs_b]
    return "by construction" if same else "by outcome"


def _seed_variance(columns, names_a, names_b, metric: Metric) -> float | None:
    """The variance of the per-seed differences (seeds paired by index), None below 2 seeds."""
    diffs = [
        columns[x][metric.numerator].mean() - columns[y][metric.numerator].mean()
        for x, y in zip(names_a, names_b, strict=False)
    ]
    return float(np.var(diffs, ddof=1)) if len(diffs) >= 2 else None


def aa_rows(arms, by_arm, columns) -> list[dict[str, Any]]:
    """One A/A row per arm (its runs with their banks again under other sampling seeds, seeds
    pooled) and the bare A/A (the base policy twice): the noise floor of each level."""
    pairs = [("base/bare", ["base/bare"])] + [
        (arm.name, [r["conditions"]["bank"] for r in by_arm[arm.name]]) for arm in arms
    ]
    rows = []
    for label, names in pairs:
        copies = [f"{n}{AA_SUFFIX}" for n in names]
        if not all(c in columns for c in copies):
            continue  # an evaluation without A/A copies (older experiment folders)
        a, b = pooled(columns, copies), pooled(columns, names)
        rows.append(
            {
                "a": f"{label}{AA_SUFFIX}",
                "b": label,
                "policy": "bare" if label == "base/bare" else "bank",
                "kind": "A/A",
                "differences": {
                    m.name: paired_bootstrap(
                        a, b, m, seed=derived_seed(BOOTSTRAP_SEED, "aa", label, m.name)
                    )
                    for m in METRICS
                },
                "variance": {
                    m.name: {"task": float(np.var(a[m.numerator] - b[m.numerator], ddof=1))}
                    for m in METRICS
                },
            }
        )
    return rows


def adjust_and_power(rows: list[dict[str, Any]], *, n_tasks: int) -> dict[str, Any]:
    """Holm within each metric's family of contrasts, each contrast's MDE and verdict, and the
    table's MDE from the contrasts' mean paired variance (the A/A rows' when no row contrasts)."""
    contrasts = [row for row in rows if row["kind"] == "contrast"]
    for row in contrasts:
        row["adjusted"] = {"method": "holm", "alpha": stats.ALPHA, "family": len(contrasts)}
        row["mde"], row["verdict"] = {}, {}
    power: dict[str, Any] = {
        "alpha": stats.ALPHA,
        "power": stats.POWER,
        "mde": {},
        "mde_holm_first_step": {},
        "contrasts": len(contrasts),
    }
    for m in METRICS:
        family = stats.holm([row["differences"][m.name]["p"] for row in contrasts])
        for row, adjusted in zip(contrasts, family, strict=True):
            row["adjusted"][m.name] = adjusted
            v = row["variance"][m.name]
            se = stats.paired_se(v["task"], n_tasks, v["seed"] or 0.0, v["seeds"])
            row["mde"][m.name] = stats.mde(se)
            row["verdict"][m.name] = stats.verdict(
                row["differences"][m.name], adjusted, EFFECT_OF_INTEREST[m.name]
            )
        basis_rows = contrasts or [row for row in rows if row["kind"] == "A/A"]
        if not basis_rows:
            continue
        task = float(np.mean([row["variance"][m.name]["task"] for row in basis_rows]))
        seed_values = [row["variance"][m.name].get("seed") for row in basis_rows]
        seed = float(np.mean(seed_values)) if all(v is not None for v in seed_values) else 0.0
        seeds = min(row["variance"][m.name].get("seeds", 1) for row in basis_rows)
        se = stats.paired_se(task, n_tasks, seed, seeds)
        power["mde"][m.name] = stats.mde(se)
        power["mde_holm_first_step"][m.name] = stats.mde(
            se, alpha=stats.ALPHA / max(1, len(contrasts))
        )
    seeds_used = contrasts and all(
        row["variance"]["r_success"]["seed"] is not None for row in contrasts
    )
    power["basis"] = (
        f"two-sided paired test at alpha {stats.ALPHA} with power {stats.POWER}: MDE = "
        "(z_{1-alpha/2} + z_power) x SE, SE^2 = mean over the "
        + ("contrast rows" if contrasts else "A/A rows (no row contrasts)")
        + f" of the per-task paired differences' variance / {n_tasks} tasks"
        + (
            " + the variance of the per-seed differences / seeds (seeds paired by index)"
            if seeds_used
            else "; one seed: training-seed variance not included"
        )
        + "; mde_holm_first_step uses alpha / (number of contrasts), the first step of Holm"
    )
    return power


def confirmation_rows(runs: Sequence[Mapping[str, Any]], confirm: Mapping[str, Any]) -> list[dict]:
    """Per run: the gates' estimate of its final bank beside the bank measured once on tasks no
    gate used (strict reward, bank - bare); the gap is the selection bias of reused validation."""
    measured = {(c["a"], c["b"]): c["differences"]["r_strict"] for c in confirm["comparisons"]}
    rows = []
    for run in runs:
        found = measured.get((run["conditions"]["bank"], run["conditions"]["bare"]))
        rows.append(
            {
                "run": run["name"],
                "arm": run["arm"],
                "bank_size": run["final"]["bank_size"],
                "gate_estimate": run["final"]["gate_estimate"],
                "confirmation": found,
                "n_tasks": confirm["n_tasks"],
                "val_policy": run["effective_config"]["gate"].get("val_policy", "fixed"),
            }
        )
    return rows
