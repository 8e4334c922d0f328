"""A synthetic run folder (two rounds) in the layout `intraskill demo` writes, for report tests.

Every number here is invented for the test and written down in this file; tests compare the
report against these, never against the report code's own arithmetic.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

STEPS_PER_ROUND = 4
ROUNDS = 2


def chunk(slug: str, title: str) -> dict:
    return {
        "title": title,
        "applies_when": "the task states constraints",
        "procedure": ["do the thing", "check the thing"],
        "verify": "the thing holds",
        "avoid": "skipping the check",
    }


def entry(position: int, chunk_id: int, slug: str, version: int, rho: float, title: str) -> dict:
    return {
        "position": position,
        "chunk_id": chunk_id,
        "slug": slug,
        "version": version,
        "chunk_version_id": chunk_id * 10 + version,
        "rho": rho,
        "coefficient": round((rho - 0.2) / 7, 4),
        "content_hash": f"{chunk_id:02d}{version:02d}" * 16,
        "content": chunk(slug, title),
    }


# S0: query, price, persona. S1: price rewritten (v2), persona retired, options added.
# S2: options rho up, query retired.
BANKS = [
    {"id": 1, "round": 0, "status": "frozen", "parent_bank_id": None, "entries": [
        entry(0, 1, "query-constraints", 1, 0.9, "搜索查询构建 - 显式约束整合"),
        entry(1, 2, "price-check", 1, 0.5, "Check the price before buying"),
        entry(2, 3, "persona-evidence", 1, 0.2, "Use the persona's preferences"),
    ]},
    {"id": 2, "round": 1, "status": "frozen", "parent_bank_id": 1, "entries": [
        entry(0, 1, "query-constraints", 1, 0.6, "搜索查询构建 - 显式约束整合"),
        entry(1, 2, "price-check", 2, 0.9, "Check the variant price before buying"),
        entry(2, 4, "option-axes", 1, 0.3, "Choose every option axis"),
    ]},
    {"id": 3, "round": 2, "status": "frozen", "parent_bank_id": 2, "entries": [
        entry(0, 2, "price-check", 2, 0.7, "Check the variant price before buying"),
        entry(1, 4, "option-axes", 1, 0.9, "Choose every option axis"),
    ]},
]  # fmt: skip


def decision_row(slug, version, kind, status, coef, half, rank=None) -> dict:
    return {
        "chunk_version_id": 1,
        "chunk_id": 1,
        "slug": slug,
        "version": version,
        "kind": kind,
        "slot": 0,
        "coefficients": {"r_strict": coef, "r_success": coef},
        "rank": rank,
        "status": status,
        "hc3_se": {"r_strict": half / 1.96},
        "ci_low": {"r_strict": coef - half},
        "ci_high": {"r_strict": coef + half},
    }


def gate(gate_id: int, round_: int, kind: str, rows: list[dict], provisional=False) -> dict:
    return {
        "id": gate_id,
        "kind": kind,
        "round": round_,
        "checkpoint_id": f"ckpt-r{round_}",
        "base_bank_id": None if kind == "gate_a" else round_,
        "n_tasks": 16,
        "budget": 10,
        "mask_seed": 20260901,
        "status": "incomplete" if provisional else "complete",
        "decision": {
            "id": gate_id,
            "provisional": provisional,
            "n_observations": 16,
            "rows": rows,
        },
    }


GATES = [
    gate(1, 0, "gate_a", [
        decision_row("query-constraints", 1, "draft", "selected", 0.10, 0.06, 1),
        decision_row("price-check", 1, "draft", "selected", 0.04, 0.05, 2),
        decision_row("persona-evidence", 1, "draft", "selected", 0.01, 0.05, 3),
        decision_row("loop-guard", 1, "draft", "non_positive", -0.03, 0.05),
    ]),
    gate(2, 1, "online", [
        decision_row("query-constraints", 1, "current", "selected", 0.05, 0.05, 2),
        decision_row("price-check", 1, "rewrite", "rewrite_loser", 0.02, 0.05),
        decision_row("price-check", 2, "rewrite", "selected", 0.12, 0.06, 1),
        decision_row("persona-evidence", 1, "current", "retired", -0.02, 0.04),
        decision_row("option-axes", 1, "add", "selected", 0.02, 0.05, 3),
    ]),
    gate(3, 2, "online", [
        decision_row("query-constraints", 1, "current", "retired", -0.01, 0.05),
        decision_row("price-check", 2, "current", "selected", 0.06, 0.05, 2),
        decision_row("option-axes", 1, "current", "selected", 0.09, 0.05, 1),
    ]),
]  # fmt: skip

FUNNEL = {
    0: {"all_wrong_groups": 7, "failed_retries": 5, "deficits": 2, "cards": 5, "verified": 4,
        "eligible": 3, "candidates": 2},
    1: {"all_wrong_groups": 4, "failed_retries": 3, "deficits": 1, "cards": 3, "verified": 1,
        "eligible": 1, "candidates": 1},
}  # fmt: skip
# each round's paired checks (card id, with, without, k): round 0 verifies cards 1-4 of 5
VERIFICATION = {
    0: [(1, 3, 0), (2, 2, 1), (3, 1, 0), (4, 4, 2), (5, 1, 1)],
    1: [(6, 2, 0), (7, 0, 0), (8, 2, 2)],
}


def checks(r: int) -> list[dict]:
    return [
        {"card_id": card, "with": w, "without": wo, "k": 4, "seeds": [10, 11, 12, 13],
         "verified": w >= 1 and w > wo}
        for card, w, wo in VERIFICATION[r]
    ]  # fmt: skip


TEST = {  # condition -> (success, low, high, strict)
    "base/bare": (0.25, 0.15, 0.35, 0.30),
    "base/S0": (0.40, 0.30, 0.50, 0.45),
    "trained/bare": (0.55, 0.45, 0.65, 0.58),
    "trained/S_T": (0.80, 0.72, 0.88, 0.82),
}
DIFFERENCE = ("trained/S_T", "base/bare", 0.55, 0.43, 0.67)


def metrics_lines(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    lines = []
    for round_ in range(ROUNDS):
        for step in range(STEPS_PER_ROUND):
            global_step = round_ * STEPS_PER_ROUND + step + 1
            success = min(1.0, 0.2 + 0.07 * global_step + rng.uniform(-0.03, 0.03))
            lines.append(
                {
                    "round": round_,
                    "step": global_step,
                    "reward": success + 0.05,
                    "success": success,
                    "all_wrong_rate": max(0.0, 0.5 - 0.05 * global_step),
                    "skill_free_group_rate": 0.2 + rng.uniform(-0.05, 0.05),
                    "assisted_empty_group_rate": 0.05,
                    "technical_drops": step % 2,
                    "zero_variance_drops": 3 - step % 3,
                    "chunks": {"price-check": {"target_rho": 0.5, "inclusion_rate": 0.4}},
                    "episodes_generated": 64,
                    "episodes_admitted": 32,
                    "optimizer_updates": 2,
                    "loss": 0.1 / global_step,
                    "clip_fraction": 0.01,
                }
            )
    return lines


def write_run(folder: Path, *, policy: str = "procedural") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    train = folder / "train" / "synthetic-run"  # where the demo's trainer writes
    train.mkdir(parents=True, exist_ok=True)
    lines = metrics_lines()
    # a torn last line, as a run killed mid-write leaves it
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"round": 1, "st'
    (train / "metrics.jsonl").write_text(text)
    snapshot = {
        "banks": BANKS,
        "gates": GATES,
        "aliases": {
            "current": [
                {"revision": i + 1, "to_bank_id": b["id"], "action": "move"}
                for i, b in enumerate(BANKS)
            ]
        },
        "candidates": [],
        "cards": [],
        "evidence": [],
    }
    (folder / "registry.json").write_text(json.dumps(snapshot, ensure_ascii=False))
    summary = {
        "policy": policy,
        "rounds": [
            {
                "round": r,
                "bank_id": BANKS[r]["id"],
                "bank_size": len(BANKS[r]["entries"]),
                "cards": FUNNEL[r]["cards"],
                "eligible": FUNNEL[r]["eligible"],
                "candidates": FUNNEL[r]["candidates"],
                "admitted": 1,
                "funnel": FUNNEL[r],
                "verification": checks(r),
                "gate_status": "complete",
            }
            for r in range(ROUNDS)
        ],
        "test": {
            name: {"success": s, "success_ci": [lo, hi], "r_strict": strict}
            for name, (s, lo, hi, strict) in TEST.items()
        },
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    a, b, estimate, low, high = DIFFERENCE
    evaluation = {
        "n_tasks": 40,
        "conditions": {
            name: {"metrics": {"r_success": s, "r_strict": strict, "steps": 6.0}}
            for name, (s, _, _, strict) in TEST.items()
        },
        "comparisons": [
            {
                "a": a,
                "b": b,
                "differences": {"r_success": {"estimate": estimate, "low": low, "high": high}},
                "flips": {"fail_to_success": 23, "success_to_fail": 1},
            }
        ],
    }
    (folder / "test").mkdir(exist_ok=True)
    (folder / "test" / "evaluation.json").write_text(json.dumps(evaluation))
    return folder
