"""`RUN_DIR/summary.json`: banks per round, the slow loop's output, gate decisions, test table."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from statsmodels.stats.proportion import proportion_confint

from shared.contracts.registry_api.client import NotFound, RegistryClient
from shared.runtime.noise_floor import comparison_label

if TYPE_CHECKING:
    from pathlib import Path

    from shared.apps.demo.session import DemoSession

CONDITIONS = ("base/bare", "base/S0", "trained/bare", "trained/S_T")
CANDIDATE_KINDS = ("add", "rewrite")

# What the test table can show, per policy. The procedural TEST DOUBLE switches a behaviour on
# when a chunk title carries one of its six cue phrases, and the `rules` analyst writes templates
# whose titles carry exactly those cues: its gain is planted, and its "trained" checkpoints act
# with no weights (the trainer updates a tiny model on its tokens, which never acts).
TEST_NOTES = {
    "procedural": (
        "procedural TEST DOUBLE: the gain checks the plumbing and the gates' power to detect a "
        "planted effect (six cue phrases the rules backend writes), not discovery of useful "
        "text; 'trained' involves no weights"
    ),
    "model": "model: 'trained' is the policy's weights after the rounds' GRPO updates",
}


def policy_statement(policy: str) -> dict[str, Any]:
    """Whether the trained conditions act with trained weights, and the test table's note."""
    return {"trained_means_weights": policy == "model", "test_note": TEST_NOTES[policy]}


def success_interval(success: float, n: int) -> list[float]:
    """Wilson 95% interval of a success rate over n test tasks (one rollout each)."""
    low, high = proportion_confint(round(success * n), n, alpha=0.05, method="wilson")
    return [float(low), float(high)]


def round_entry(round_record: dict[str, Any], registry: RegistryClient) -> dict[str, Any]:
    """One training round: the bank it trained under and what its slow loop and gate did."""
    bank = registry.get_bank(round_record["bank_id"])
    funnel = round_record.get("funnel") or {}
    admitted = 0
    if round_record.get("gate_run_id"):
        try:
            decision = registry.get_gate_decision(round_record["gate_run_id"])
        except NotFound:
            decision = None
        if decision is not None and not decision.provisional:
            admitted = sum(
                row.status.value == "selected" and row.kind.value in CANDIDATE_KINDS
                for row in decision.rows
            )
    return {
        "round": round_record["round"],
        "bank_id": bank.id,
        "bank_size": len(bank.entries),
        "cards": funnel.get("cards", 0),
        "eligible": funnel.get("eligible", 0),
        "candidates": len(round_record.get("candidate_ids") or []),
        "admitted": admitted,
        "all_wrong_groups": round_record.get("all_wrong_groups", 0),
        "funnel": {
            "all_wrong_groups": funnel.get("all_wrong_groups", 0),
            "failed_retries": funnel.get("retries", 0)
            - funnel.get("deficits", 0)
            - funnel.get("runtime_errors", 0),
            "deficits": funnel.get("deficits", 0),
            "cards": funnel.get("cards", 0),
            "verified": funnel.get("verified", 0),
            "eligible": funnel.get("eligible", 0),
            "candidates": funnel.get("candidates", 0),
        },
        "verification": round_record.get("verification") or [],  # each checked card's counts
        "gate_status": round_record.get("gate_status"),
        "gate_run_id": round_record.get("gate_run_id"),
        "next_bank_id": round_record.get("next_bank_id"),
        "checkpoint_id": round_record.get("checkpoint_id"),
    }


def condition_table(evaluation: dict[str, Any]) -> dict[str, Any]:
    n = int(evaluation.get("n_tasks") or 0)
    table = {}
    for name in CONDITIONS:
        metrics = evaluation.get("conditions", {}).get(name, {}).get("metrics", {})
        if "r_success" not in metrics or n == 0:
            continue
        success = float(metrics["r_success"])
        table[name] = {
            # evaluated once with the condition it equals by construction (e.g. an empty S_0)
            "identical_to": evaluation["conditions"][name].get("identical_to"),
            "success": success,
            "success_ci": success_interval(success, n),
            "r_strict": metrics.get("r_strict"),
            "n_tasks": n,
        }
    return table


def build_summary(demo: DemoSession, train_dir: Path, registry: RegistryClient) -> dict[str, Any]:
    record = json.loads((train_dir / "run.json").read_text())
    evaluation = json.loads((demo.run_dir / "test" / "evaluation.json").read_text())
    comparisons = {
        comparison_label(c): c["differences"]["r_success"]
        for c in evaluation.get("comparisons", [])
    }
    return {
        "policy": demo.options.policy,
        "policy_is_test_double": demo.options.policy != "model",
        **policy_statement(demo.options.policy),
        "run_id": demo.run_id,
        "s0_bank_id": demo.state.get("s0_bank_id"),
        "cold_start": demo.state.get("cold_start"),  # the job's result: cards, paired checks, S_0
        "final_bank_id": registry.get_alias("current").bank_id,
        "rounds": [round_entry(r, registry) for r in record["rounds"]],
        "test": condition_table(evaluation),
        "test_differences": comparisons,
        "report": str(demo.run_dir / "report.html"),
        "seconds": demo.state.get("seconds") or {},  # wall time per phase, summed over resumes
    }
