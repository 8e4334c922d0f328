import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.evaluator.design import gate_a_design, online_design
from services.evaluator.selection import STATUSES, family_winner, select
from shared.contracts.inclusion import rho_from_coefficients


def test_exact_tie_keeps_old_and_then_the_earlier_new_version():
    design = online_design(["a"], rewrites={"a": ["a-new1", "a-new2"]})
    slot = design.slots[0]
    assert family_winner(slot, {"a": 0.1, "a-new1": 0.1, "a-new2": 0.1}).intervention_id == "a"
    assert family_winner(slot, {"a": 0.0, "a-new1": 0.1, "a-new2": 0.1}).intervention_id == "a-new1"
    assert family_winner(slot, {"a": 0.0, "a-new1": 0.1, "a-new2": 0.2}).intervention_id == "a-new2"


def test_winning_rewrite_keeps_logical_id_and_position_adds_follow():
    design = online_design(["a", "b", "c"], adds=["add-2", "add-1"], rewrites={"b": ["b-new"]})
    coefficients = {"a": 0.01, "b": 0.02, "b-new": 0.05, "c": -0.01, "add-1": 0.03, "add-2": 0.0}
    selection = select(design, coefficients)
    assert [(e.logical_id, e.intervention_id) for e in selection.bank] == [
        ("a", "a"),
        ("b", "b-new"),
        ("add-1", "add-1"),
    ]
    assert selection.status == {
        "a": "selected",
        "b": "rewrite_loser",
        "b-new": "selected",
        "c": "retired",
        "add-1": "selected",
        "add-2": "non_positive",
    }
    assert selection.rank == {"a": 3, "b": None, "b-new": 1, "c": 5, "add-1": 2, "add-2": 4}


def test_budget_cuts_positive_winners_current_retire_candidates_budget_excluded():
    current = [f"cur-{i:02d}" for i in range(8)]
    adds = [f"add-{i:02d}" for i in range(6)]
    design = online_design(current, adds=adds, budget=10)
    # all positive; adds weaker than currents except add-00; equal coefficients broken by id
    coefficients = {cid: 0.5 - i * 0.01 for i, cid in enumerate(current)}
    coefficients.update({aid: 0.1 - i * 0.01 for i, aid in enumerate(adds)})
    coefficients["add-00"] = 0.5
    selection = select(design, coefficients)
    assert len(selection.bank) == 10
    status = selection.status
    assert status["add-00"] == "selected"  # tie at 0.5 with cur-00, ranked by id: add-00 first
    assert selection.rank["add-00"] == 1 and selection.rank["cur-00"] == 2
    assert [aid for aid in adds if status[aid] == "budget_excluded"] == adds[2:]
    assert all(status[cid] == "selected" for cid in current)
    tight = select(design, coefficients, budget=3)
    assert tight.selected == ("cur-00", "cur-01", "add-00")
    assert tight.status["cur-05"] == "retired"


def test_gate_a_has_no_families_and_ties_break_by_chunk_id():
    design = gate_a_design(["d3", "d1", "d2"], budget=1)
    selection = select(design, {"d1": 0.2, "d2": 0.2, "d3": -0.1})
    assert selection.selected == ("d1",)
    assert selection.status == {"d3": "non_positive", "d1": "selected", "d2": "budget_excluded"}


def test_missing_coefficient_is_an_error():
    with pytest.raises(ValueError, match="no coefficient for b"):
        select(online_design(["a", "b"]), {"a": 0.1})


_coef = st.floats(-0.2, 0.2, allow_nan=False).map(lambda x: round(x, 3))


@settings(max_examples=200, deadline=None)
@given(
    n_current=st.integers(1, 8),
    n_adds=st.integers(0, 6),
    rewrite_counts=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    values=st.lists(_coef, min_size=40, max_size=40),
    budget=st.integers(1, 10),
)
def test_selection_invariants(n_current, n_adds, rewrite_counts, values, budget):
    current = [f"c{i}" for i in range(n_current)]
    rewrites = {c: [f"{c}-n{k}" for k in range(rewrite_counts[i])] for i, c in enumerate(current)}
    design = online_design(current, adds=[f"a{i}" for i in range(n_adds)], rewrites=rewrites)
    coefficients = dict(zip(design.column_ids, values, strict=False))
    selection = select(design, coefficients, budget=budget)
    kept = set(selection.selected)
    assert len(kept) <= budget
    assert all(coefficients[vid] > 0 for vid in kept)
    assert set(selection.status.values()) <= set(STATUSES)
    for slot in design.slots:  # at most one version per slot, and it is the family's best
        ids = [v.intervention_id for v in slot.versions]
        assert sum(vid in kept for vid in ids) <= 1
        assert sum(selection.rank[vid] is not None for vid in ids) == 1
        best = max(coefficients[vid] for vid in ids)
        assert all(coefficients[vid] == best for vid in ids if vid in kept)
    ranks = sorted(r for r in selection.rank.values() if r is not None)
    assert ranks == list(range(1, len(design.slots) + 1))
    max_kept_rank = max((selection.rank[vid] for vid in kept), default=0)
    for vid, status in selection.status.items():
        if status in ("budget_excluded", "retired") and coefficients[vid] > 0:
            assert selection.rank[vid] > max_kept_rank and len(kept) == budget
    orders = [design.version(vid).order for vid in selection.selected]
    assert orders == sorted(orders)
    rho = rho_from_coefficients({e.intervention_id: e.coefficient for e in selection.bank})
    assert all(0.2 <= value <= 0.9 for value in rho.values())
    if rho:
        assert max(rho.values()) == pytest.approx(0.9)


def test_rho_mapping_clips_and_refuses_nonpositive():
    assert rho_from_coefficients({}) == {}
    rho = rho_from_coefficients({"a": 0.1, "b": 0.05, "c": 1e-9})
    assert rho["a"] == pytest.approx(0.9) and rho["b"] == pytest.approx(0.55)
    assert rho["c"] == pytest.approx(0.2, abs=1e-6)
    assert rho_from_coefficients({"a": 0.1, "b": 0.3}, scale=0.1)["b"] == 0.9  # clipped
    with pytest.raises(ValueError, match="positive coefficients: b"):
        rho_from_coefficients({"a": 0.1, "b": 0.0})


def test_lower_bound_admission_keeps_only_chunks_whose_bound_is_above_zero():
    design = online_design(["cur"], adds=["sure", "unsure", "bad"], budget=10)
    coefficients = {"cur": 0.04, "sure": 0.10, "unsure": 0.06, "bad": -0.02}
    bounds = {"cur": -0.01, "sure": 0.03, "unsure": -0.02, "bad": -0.09}
    # the method's rule: every positive coefficient is admitted
    plain = select(design, coefficients)
    assert set(plain.selected) == {"cur", "sure", "unsure"}
    # the lower-bound rule: only the effect the gate is sure of; a current chunk that is not
    # kept retires, a positive candidate below its bound is `below_bound`
    strict = select(design, coefficients, lower_bounds=bounds)
    assert strict.selected == ("sure",)
    assert strict.status == {
        "cur": "retired",
        "sure": "selected",
        "unsure": "below_bound",
        "bad": "non_positive",
    }
    assert strict.rank == plain.rank  # ranks stay by coefficient
