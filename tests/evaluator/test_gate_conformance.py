"""The public reference gates: our fit and selection reproduce the published decisions."""

import json

import pytest
from reference_data import PUBLISHED_ROUNDS, REFERENCE_GATES, ROUNDS, expected, round_dir

from services.evaluator import cli
from services.evaluator.gate_folder import read_gate_folder
from services.evaluator.selection import STATUSES
from shared.contracts.inclusion import rho_from_coefficients

REFIT_KEYS = {"coefficients", "aux_coefficients", "selected", "rank", "status", "next_rho"}
# beside the published fields: each coefficient's HC3 interval, its one-sided lower bound and
# the admission rule the selection used (issue 27)
INTERVAL_KEYS = {"ci_low", "ci_high", "lower_bound", "admit"}


def refit_json(capsys, number, *extra):
    assert cli.main(["refit", str(round_dir(number)), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def max_abs_error(ours: dict, theirs: dict) -> float:
    assert ours.keys() == theirs.keys()
    return max(abs(ours[key] - theirs[key]) for key in theirs)


@pytest.mark.parametrize("number", PUBLISHED_ROUNDS)
@pytest.mark.parametrize("solver", ["statsmodels", "reference"])
def test_refit_reproduces_published_decisions(capsys, number, solver):
    out = refit_json(capsys, number, "--solver", solver)
    published = expected(number)
    assert set(out) == REFIT_KEYS | INTERVAL_KEYS
    assert out["admit"] == "coefficient"  # the method's rule unless asked otherwise
    assert max_abs_error(out["coefficients"], published["coefficients"]) < 1e-9
    assert out["aux_coefficients"].keys() == published["aux_coefficients"].keys()
    for component, values in published["aux_coefficients"].items():
        assert max_abs_error(out["aux_coefficients"][component], values) < 1e-9
    assert out["selected"] == published["selected"]  # bank (slot) order
    assert out["rank"] == published["rank"]
    assert out["status"] == published["status"]
    assert list(out["next_rho"]) == list(published["next_rho"])
    if solver == "reference":
        # the reference solver is bit-identical, so every published number comes back exactly
        assert out["coefficients"] == published["coefficients"]
        assert out["aux_coefficients"] == published["aux_coefficients"]
        assert out["next_rho"] == published["next_rho"]
    else:
        # statsmodels' pinv differs from the published solver in the last bits (~2e-16)
        assert max_abs_error(out["next_rho"], published["next_rho"]) < 1e-12


@pytest.mark.parametrize("number", PUBLISHED_ROUNDS)
def test_rho_map_is_exact_on_published_coefficients(number):
    published = expected(number)
    kept = {vid: published["coefficients"][vid] for vid in published["selected"]}
    assert rho_from_coefficients(kept) == published["next_rho"]


def test_cold_start_curriculum_rho_is_the_same_map():
    path = REFERENCE_GATES / "cold-start-curriculum.json"
    curriculum = json.loads(path.read_text(encoding="utf-8"))
    contributions = {chunk["id"]: chunk["contribution"] for chunk in curriculum["chunks"]}
    rho = rho_from_coefficients(contributions)
    assert rho == {chunk["id"]: chunk["inclusion_probability"] for chunk in curriculum["chunks"]}


@pytest.mark.parametrize("number", ROUNDS)
def test_every_round_runs_through_refit_with_consistent_decisions(capsys, number):
    out = refit_json(capsys, number, "--intervals")
    data = read_gate_folder(round_dir(number))
    design = data.design
    ids = list(design.column_ids)
    assert list(out["coefficients"]) == ids
    assert set(out["aux_coefficients"]) == {
        "r_success",
        "r_type",
        "r_att",
        "r_option",
        "r_price",
        "r_loose",
    }
    assert set(out["status"].values()) <= set(STATUSES)
    selected = out["selected"]
    assert 0 < len(selected) <= design.budget
    assert all(out["coefficients"][vid] > 0 for vid in selected)
    assert all(out["status"][vid] == "selected" for vid in selected)
    assert [vid for vid in ids if out["status"][vid] == "selected"] == selected  # bank order
    for slot in design.slots:
        versions = [v.intervention_id for v in slot.versions]
        winners = [vid for vid in versions if out["rank"][vid] is not None]
        assert len(winners) == 1
        best = max(out["coefficients"][vid] for vid in versions)
        assert out["coefficients"][winners[0]] == best
        for vid in versions:
            if vid != winners[0]:
                assert out["status"][vid] == "rewrite_loser"
            elif vid not in selected:
                assert out["coefficients"][vid] <= 0 or len(selected) == design.budget
                kind = design.version(vid).kind
                assert out["status"][vid] == ("retired" if kind == "current" else "non_positive")
    ranks = sorted(r for r in out["rank"].values() if r is not None)
    assert ranks == list(range(1, len(design.slots) + 1))
    assert list(out["next_rho"]) == selected
    assert max(out["next_rho"].values()) == pytest.approx(0.9)
    assert all(0.2 <= rho <= 0.9 for rho in out["next_rho"].values())
    strict = out["intervals"]["r_strict"]
    assert strict["n"] == 400
    for vid in ids:
        assert strict["ci_low"][vid] < out["coefficients"][vid] < strict["ci_high"][vid]
        assert 0.01 < strict["hc3_se"][vid] < 0.1


def test_refit_table_and_errors(capsys, tmp_path):
    assert cli.main(["refit", str(round_dir(2))]) == 0
    table = capsys.readouterr().out
    assert "online-5592406a6a90ea8f" in table and "selected" in table and "HC3 SE" in table
    (tmp_path / "slots.json").write_text("{}")
    assert cli.main(["refit", str(tmp_path)]) == 1
    assert "missing observations.jsonl" in capsys.readouterr().err
    assert cli.main(["refit", str(round_dir(0)), "--solver", "lapack"]) == 2
