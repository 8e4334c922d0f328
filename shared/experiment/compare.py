"""The arms compared, paired by task: what `comparison.json` holds (pure, given the files).

Each arm's test success is the mean over its seeds of its runs' per-task outcomes, so arm A and
arm B are compared on the same tasks (`shared.paired_bootstrap`, the evaluator's own interval:
tasks are resampled, the same resampled tasks enter both sides). The interval covers the test
tasks' sampling, not training-seed variation: the per-seed figures are listed beside it, and
with two seeds they show the spread, not a distribution. The A/A row (one condition, other
sampling seeds) is the noise floor every difference should be read against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared.hashing import content_hash
from shared.paired_bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Metric,
    derived_seed,
    paired_bootstrap,
)

METRICS = (Metric("r_success", "r_success"), Metric("r_strict", "r_strict"))
POLICIES = ("bank", "bare")  # each final checkpoint with its final bank, and without any


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
    from shared.report.data import read_metrics

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


def level(columns: Mapping[str, np.ndarray], metric: Metric, seed: int) -> dict[str, float]:
    """A condition's mean with its bootstrap interval: the paired bootstrap against zero."""
    zero = {key: np.zeros_like(value) for key, value in columns.items()}
    return paired_bootstrap(columns, zero, metric, seed=seed, resamples=BOOTSTRAP_RESAMPLES)


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
        "bootstrap": {
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "level": 0.95,
            "paired_by": "task",
            "arm_columns": "per-task mean over the arm's seeds",
        },
        "base": {
            m.name: level(columns["base/bare"], m, derived_seed(BOOTSTRAP_SEED, "base", m.name))
            for m in METRICS
        },
        "arms": {},
        "comparisons": [],
        "runs": list(runs),
    }
    for arm in arms:
        members = by_arm[arm.name]
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
            entry["test"][which] = {
                m.name: level(
                    pooled(columns, names), m, derived_seed(BOOTSTRAP_SEED, arm.name, which, m.name)
                )
                for m in METRICS
            } | {
                "per_seed": [test["conditions"][n]["metrics"]["r_success"] for n in names],
                "identical_to": identical if any(identical) else None,
            }
        result["arms"][arm.name] = entry
    reference = arms[0]
    for other in arms[1:]:
        for which in POLICIES:
            names_a = [r["conditions"][which] for r in by_arm[reference.name]]
            names_b = [r["conditions"][which] for r in by_arm[other.name]]
            a, b = pooled(columns, names_a), pooled(columns, names_b)
            one = [rolled_out_as(test, n) for n in names_a] == [
                rolled_out_as(test, n) for n in names_b
            ]
            result["comparisons"].append(
                {
                    "a": reference.name,
                    "b": other.name,
                    "policy": which,
                    "kind": "identical" if one else "contrast",
                    "differences": {
                        m.name: paired_bootstrap(
                            a,
                            b,
                            m,
                            seed=derived_seed(
                                BOOTSTRAP_SEED, reference.name, other.name, which, m.name
                            ),
                        )
                        for m in METRICS
                    },
                }
            )
    for row in test.get("comparisons", []):
        if row.get("kind") == "A/A":
            result["comparisons"].append(
                {
                    "a": row["a"],
                    "b": row["b"],
                    "policy": "bank",
                    "kind": "A/A",
                    "differences": {m.name: row["differences"][m.name] for m in METRICS},
                }
            )
    if confirm is not None:
        result["confirmation"] = confirmation_rows(runs, confirm)
    return result


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
