"""evidence.json: the figures come from the run's records by the rules written in the issue
(verified = the paired check's verdict stored on the card; Gate A rows on the strict reward with
their HC3 interval; Wilson intervals for single rates; the MDE at 5 % / 80 % from the observed
paired variance; a null result called a result only when the design could see 10 pp)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from shared.apps.experiment.evidence import (
    EFFECT_OF_INTEREST_PP,
    build_evidence,
    card_evidence,
    gate_a_evidence,
    paired_mde_pp,
)


def card(card_id: int, verification: dict | None) -> SimpleNamespace:
    return SimpleNamespace(
        id=card_id, extras={"verification": verification} if verification else {}
    )


def check(with_: int, without: int, verified: bool) -> dict:
    return {"with": with_, "without": without, "k": 4, "seeds": [1, 2, 3, 4], "verified": verified}


def test_only_cards_the_paired_check_verified_count() -> None:
    cards = [card(1, check(3, 1, True)), card(2, check(2, 2, False)), card(3, None)]
    result = card_evidence(cards)
    assert result["total"] == 3 and result["checked"] == 2 and result["verified"] == 1
    assert result["verified_cards"] == [{"id": 1, "with": 3, "without": 1, "k": 4}]


def test_gate_a_rows_read_the_strict_reward_and_the_selection() -> None:
    rows = [
        SimpleNamespace(slug="query", version=1, coefficients={"r_strict": 0.04, "r_success": 0.1},
                        ci_low={"r_strict": -0.02}, ci_high={"r_strict": 0.1}, status="selected"),
        SimpleNamespace(slug="price", version=2, coefficients={"r_strict": -0.01},
                        ci_low={"r_strict": -0.05}, ci_high={"r_strict": 0.03},
                        status="non_positive"),
    ]  # fmt: skip
    gate = SimpleNamespace(n_tasks=100, status="complete")
    result = gate_a_evidence(gate, SimpleNamespace(rows=rows, provisional=False))
    assert result["n_tasks"] == 100
    assert result["rows"] == [
        {
            "chunk": "query@1",
            "coefficient": 0.04,
            "ci_low": -0.02,
            "ci_high": 0.1,
            "admitted": True,
        },
        {
            "chunk": "price@2",
            "coefficient": -0.01,
            "ci_low": -0.05,
            "ci_high": 0.03,
            "admitted": False,
        },
    ]
    assert gate_a_evidence(gate, None)["rows"] == []


def test_single_rates_carry_wilson_intervals_not_zero_width_ones() -> None:
    result = build_evidence(
        cards=[], gate_a=None, s0_size=0, arm="intraskill", phases_done=["test"],
        evaluation=evaluation({"base/bare": [0.0] * 20, "base/s0": [0.0] * 20,
                               "intraskill/s0/bare": [0.0] * 20, "intraskill/s0/bank": [0.0] * 20}),
    )  # fmt: skip
    row = result["test"]["rows"][0]
    # Wilson's upper bound at 0 successes of n is z^2 / (n + z^2).
    z2 = 1.959964**2
    assert row["ci_low"] == pytest.approx(0.0, abs=1e-12)
    assert row["ci_high"] == pytest.approx(z2 / (20 + z2), rel=1e-4)


def test_mde_from_the_paired_variance() -> None:
    differences = np.array([1.0] * 50 + [0.0] * 50)
    sd = np.std(differences, ddof=1)
    expected = 100 * (1.959964 + 0.841621) * sd / np.sqrt(100)
    assert paired_mde_pp(differences) == pytest.approx(expected, rel=1e-4)
    assert paired_mde_pp(np.array([1.0])) is None


def evaluation(columns: dict[str, list[float]]) -> dict:
    n = len(next(iter(columns.values())))
    return {
        "n_tasks": n,
        "per_task": {"columns": {name: {"r_success": values} for name, values in columns.items()}},
        "comparisons": [
            {"a": "base/bare/aa", "b": "base/bare", "kind": "A/A",
             "differences": {"r_success": {"estimate": 0.2, "low": 0.1, "high": 0.3}}},
            {"a": "aa", "b": "intraskill/s0/bank", "kind": "A/A",
             "differences": {"r_success": {"estimate": -0.01, "low": -0.05, "high": 0.03}}},
        ],
    }  # fmt: skip


def test_a_narrow_null_is_a_result_and_a_wide_one_cannot_tell() -> None:
    n = 400
    same = [1.0, 0.0] * (n // 2)
    narrow = build_evidence(
        cards=[], gate_a=None, s0_size=0, arm="intraskill", phases_done=["test"],
        evaluation=evaluation({"base/bare": same, "base/s0": same, "aa": same[::-1],
                               "intraskill/s0/bare": same, "intraskill/s0/bank": same}),
    )  # fmt: skip
    assert [row["condition"] for row in narrow["test"]["rows"]] == [
        "base/bare",
        "base/S_0",
        "trained/bare",
        "trained/S_T",
    ]
    # the final bank's A/A row, measured on the columns (every task flipped: mean 0, wide)
    assert narrow["aa"]["conditions"] == ["aa", "intraskill/s0/bank"]
    assert narrow["aa"]["estimate"] == 0.0 and narrow["aa"]["ci_low"] < -0.05
    main = narrow["contrasts"]["trained/S_T - base/bare"]
    assert main["all_differences_zero"] and main["estimate_pp"] == 0.0
    assert f"no effect of {EFFECT_OF_INTEREST_PP:.0f} pp" in narrow["verdict"]

    rng = np.random.default_rng(0)
    noisy = lambda: rng.integers(0, 2, 20).astype(float).tolist()  # noqa: E731
    wide = build_evidence(
        cards=[], gate_a=None, s0_size=0, arm="intraskill", phases_done=["test"],
        evaluation=evaluation({"base/bare": noisy(), "base/s0": noisy(),
                               "intraskill/s0/bare": noisy(), "intraskill/s0/bank": noisy()}),
    )  # fmt: skip
    assert wide["mde_pp"] > EFFECT_OF_INTEREST_PP
    assert "cannot tell" in wide["verdict"] and "could NOT have seen" in wide["verdict"]


def test_a_real_difference_reads_as_one() -> None:
    n = 200
    base = [0.0] * n
    better = [1.0] * (n // 2) + [0.0] * (n // 2)
    result = build_evidence(
        cards=[], gate_a=None, s0_size=1, arm="intraskill", phases_done=["test"],
        evaluation=evaluation({"base/bare": base, "base/s0": base,
                               "intraskill/s0/bare": base, "intraskill/s0/bank": better}),
    )  # fmt: skip
    assert result["contrasts"]["trained/S_T - trained/bare"]["estimate_pp"] == pytest.approx(50.0)
    assert (
        "trained/S_T - trained/bare (the final bank's text at the trained checkpoint): helps"
        in result["verdict"]
    )


def test_before_the_test_the_verdict_makes_no_claim_about_success() -> None:
    result = build_evidence(
        cards=[card(1, check(2, 0, True))], gate_a=None, s0_size=None, evaluation=None,
        arm="intraskill", phases_done=["warm start", "cold start"],
    )  # fmt: skip
    assert result["test"] is None and result["mde_pp"] is None
    assert "1 of 1 cards verified" in result["verdict"] and "has not run yet" in result["verdict"]


def test_before_training_ends_the_power_comes_from_s0_at_the_start_checkpoint() -> None:
    """The base test runs right after the cold start: its S_0 contrast states the design's MDE
    (same tasks, same test) and the verdict says the trained conditions are still missing."""
    rng = np.random.default_rng(1)
    bare = rng.integers(0, 2, 100).astype(float)
    s0 = rng.integers(0, 2, 100).astype(float)
    base_only = evaluation({"base/bare": bare.tolist(), "base/s0": s0.tolist(),
                            "base/bare/aa": s0[::-1].tolist()})  # fmt: skip
    base_only["comparisons"] = base_only["comparisons"][:1]  # the bare A/A row alone
    result = build_evidence(
        cards=[], gate_a=None, s0_size=1, arm="intraskill",
        phases_done=["warm start", "cold start", "base test"], evaluation=base_only,
    )  # fmt: skip
    assert [row["condition"] for row in result["test"]["rows"]] == ["base/bare", "base/S_0"]
    assert list(result["contrasts"]) == ["base/S_0 - base/bare"]
    assert result["mde_contrast"] == "base/S_0 - base/bare"
    assert result["mde_pp"] == pytest.approx(paired_mde_pp(s0 - bare))
    assert "trained conditions are not measured yet" in result["verdict"]
    assert result["aa"]["conditions"] == ["base/bare/aa", "base/bare"]  # the bare A/A row


def test_once_trained_the_main_contrast_gives_the_power() -> None:
    rng = np.random.default_rng(2)
    names = ("base/bare", "base/s0", "intraskill/s0/bare", "intraskill/s0/bank")
    cols = {n: rng.integers(0, 2, 100).astype(float).tolist() for n in names}
    result = build_evidence(
        cards=[],
        gate_a=None,
        s0_size=1,
        arm="intraskill",
        phases_done=["test"],
        evaluation=evaluation(cols),
    )
    main = np.array(cols["intraskill/s0/bank"]) - np.array(cols["base/bare"])
    assert result["mde_contrast"] == "trained/S_T - base/bare"
    assert result["mde_pp"] == pytest.approx(paired_mde_pp(main))
    assert "not measured yet" not in result["verdict"]


def test_identical_columns_carry_no_power_and_the_aa_row_states_it() -> None:
    """An empty S_0 makes base/S_0 the same rollouts as base/bare (the evaluator labels it
    `identical_to`): that row compares nothing, and its zero variance must not read as an MDE
    of 0 pp. The design's power then comes from the A/A row: two independent draws of one
    policy on the same tasks."""
    rng = np.random.default_rng(3)
    bare = rng.integers(0, 2, 100).astype(float)
    aa = rng.integers(0, 2, 100).astype(float)
    base_only = evaluation({"base/bare": bare.tolist(), "base/s0": bare.tolist(),
                            "base/bare/aa": aa.tolist()})  # fmt: skip
    base_only["comparisons"] = base_only["comparisons"][:1]
    base_only["conditions"] = {"base/s0": {"identical_to": "base/bare"}, "base/bare": {}}
    result = build_evidence(
        cards=[], gate_a=None, s0_size=0, arm="intraskill",
        phases_done=["warm start", "cold start", "base test"], evaluation=base_only,
    )  # fmt: skip
    row = result["contrasts"]["base/S_0 - base/bare"]
    assert row["identical"] == "by construction" and row["mde_pp"] is None
    assert "identical by construction" in result["verdict"]
    assert "no effect of" not in result["verdict"]
    assert result["mde_contrast"] == "A/A: base/bare/aa - base/bare"
    sd = np.std(aa - bare, ddof=1)
    assert result["mde_pp"] == pytest.approx(100 * (1.959964 + 0.841621) * sd / 10, rel=1e-4)


def test_all_zero_differences_give_no_mde_and_no_claim_of_power() -> None:
    assert paired_mde_pp(np.zeros(100)) is None
    same = [1.0, 0.0] * 50
    result = build_evidence(
        cards=[], gate_a=None, s0_size=1, arm="intraskill", phases_done=["base test"],
        evaluation={**evaluation({"base/bare": same, "base/s0": same}), "comparisons": []},
    )  # fmt: skip
    assert result["mde_pp"] is None
    assert "could have seen" not in result["verdict"] and "power is unknown" in result["verdict"]
