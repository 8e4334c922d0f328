"""Test-set evaluation: bootstrap, report, identity rules, CLI (simulated rollouts)."""

import dataclasses
import json

import numpy as np
import pytest

from services.evaluator import evaluate_cli
from services.evaluator.eval_conditions import Condition
from services.evaluator.eval_folder import write_plan
from services.evaluator.eval_plot import plot_report
from services.evaluator.eval_report import METRICS, evaluation_report, task_table
from services.evaluator.eval_run import PlannedEvaluation, run_evaluation
from services.evaluator.gate_job import RecordLog
from services.evaluator.pairing import IdentityMismatch, PairingError, RolloutIdentity
from services.evaluator.rollouts import SimulatedRolloutRunner
from services.evaluator.simulation import SimulatedPolicy, uniform_base_rate
from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.runtime.paired_bootstrap import ALL_ZERO_NOTE, Metric, paired_bootstrap

TASKS = tuple(f"task-{i:06d}" for i in range(300))


def chunk(slug):
    content = ChunkContent(title=slug, applies_when="a", procedure=["p"], verify="v", avoid="x")
    return InjectedChunk(chunk_id=slug, version=1, content=content)


S0 = (chunk("s0-a"), chunk("s0-b"))
ST = (chunk("st-a"),)
CONDITIONS = (
    Condition("base/bare", "base"),
    Condition("base/S0", "base", S0, bank_id=1),
    Condition("trained/bare", "trained"),
    Condition("trained/S_T", "trained", ST, bank_id=4),
)
EFFECTS = {"s0-a@1": 0.03, "s0-b@1": 0.0, "st-a@1": 0.04}


def identity(checkpoint):
    return RolloutIdentity(
        checkpoint_id=checkpoint,
        model=f"model-{checkpoint}",
        decoding="dec",
        prompt_version="layout",
        prompt_fingerprint="fp",
        env_version="shopsim-test",
        action_protocol="tools-v3",
        split="test",
    )


def runner_for(checkpoint, **kwargs):
    base = {"base": (0.4, 0.6), "trained": (0.7, 0.9)}[checkpoint]
    policy = SimulatedPolicy(EFFECTS, uniform_base_rate(*base, seed=2), seed=7)
    return SimulatedRolloutRunner(policy, identity(checkpoint), **kwargs)


def plan(**changes):
    values = dict(
        conditions=CONDITIONS, task_ids=TASKS, split="test", comparisons=None,
        resamples=2000, seed=20260901, max_retries=2,
    )  # fmt: skip
    return PlannedEvaluation(**{**values, **changes})


def test_bootstrap_of_identical_and_shifted_conditions():
    rng = np.random.default_rng(0)
    a = {"x": rng.random(200)}
    same = paired_bootstrap(a, a, Metric("x", "x"), resamples=500, seed=1)
    assert same == {
        "estimate": 0.0, "low": 0.0, "high": 0.0, "p": 1.0, "note": ALL_ZERO_NOTE
    }  # fmt: skip
    shifted = paired_bootstrap({"x": a["x"] + 0.1}, a, Metric("x", "x"), resamples=500, seed=1)
    assert shifted["estimate"] == pytest.approx(0.1)
    assert shifted["low"] == pytest.approx(0.1) and shifted["high"] == pytest.approx(0.1)
    assert shifted["p"] == 0.0 and "note" not in shifted


def test_bootstrap_is_seeded_and_ratio_metrics_use_sums():
    rng = np.random.default_rng(1)
    a = {"e": rng.integers(0, 3, 100).astype(float), "s": rng.integers(1, 10, 100).astype(float)}
    b = {"e": rng.integers(0, 3, 100).astype(float), "s": rng.integers(1, 10, 100).astype(float)}
    rate = Metric("rate", "e", "s")
    first = paired_bootstrap(a, b, rate, resamples=800, seed=5)
    assert first == paired_bootstrap(a, b, rate, resamples=800, seed=5)
    assert first != paired_bootstrap(a, b, rate, resamples=800, seed=6)
    assert first["estimate"] == pytest.approx(
        a["e"].sum() / a["s"].sum() - b["e"].sum() / b["s"].sum()
    )
    assert first["low"] < first["estimate"] < first["high"]


def test_paired_bootstrap_covers_a_known_difference():
    # paired Bernoulli outcomes with a known success-rate difference of 0.05
    covered, trials = 0, 120
    for replicate in range(trials):
        rng = np.random.default_rng(replicate)
        p = rng.uniform(0.3, 0.7, 400)
        b = (rng.random(400) < p).astype(float)
        a = (rng.random(400) < p + 0.05).astype(float)
        result = paired_bootstrap(
            {"y": a}, {"y": b}, Metric("y", "y"), resamples=1000, seed=replicate
        )
        covered += result["low"] <= 0.05 <= result["high"]
    assert 0.88 <= covered / trials <= 0.99


def test_four_condition_report_with_simulated_rollouts(tmp_path):
    records = run_evaluation(plan(), runner_for, on_record=RecordLog(tmp_path / "records.jsonl"))
    assert len(records) == 4 * len(TASKS)
    report = evaluation_report(records, CONDITIONS, TASKS, resamples=2000)
    assert report["n_tasks"] == len(TASKS) and report["dropped"] == []
    assert set(report["conditions"]) == {c.name for c in CONDITIONS}
    assert set(report["conditions"]["base/S0"]["metrics"]) == {m.name for m in METRICS}
    assert report["conditions"]["base/S0"]["chunks"] == ["s0-a@1", "s0-b@1"]
    pairs = [(c["a"], c["b"]) for c in report["comparisons"]]
    assert pairs == [
        ("trained/bare", "base/bare"), ("base/S0", "base/bare"),
        ("trained/S_T", "trained/bare"), ("trained/S_T", "base/bare"),
    ]  # fmt: skip
    trained = report["comparisons"][0]["differences"]["r_strict"]
    assert 0.2 < trained["low"] < trained["estimate"] < trained["high"] < 0.4  # true +0.3
    flips = report["comparisons"][0]["flips"]
    assert flips["fail_to_success"] > flips["success_to_fail"]
    steps = report["comparisons"][1]["differences"]["steps"]  # the double: 1 step per chunk
    assert steps["estimate"] == pytest.approx(2.0) and steps["low"] == pytest.approx(2.0)
    png = plot_report(report, tmp_path / "evaluation.png")
    assert png.stat().st_size > 10_000


def test_failed_rollouts_are_retried_and_missing_tasks_dropped_from_every_condition():
    def fail(request):  # one task never completes in base/S0; another fails once
        if request.task_id == TASKS[5] and request.condition == "base/S0":
            return True
        return request.task_id == TASKS[9] and request.attempt == 0

    records = run_evaluation(plan(max_retries=1), lambda c: runner_for(c, fail=fail))
    report = evaluation_report(records, CONDITIONS, TASKS, resamples=500)
    assert report["dropped"] == [{"task_id": TASKS[5], "missing": ["base/S0"]}]
    assert report["n_tasks"] == len(TASKS) - 1
    assert report["failed_attempts"] == 2 + 4  # task 5 twice in base/S0, task 9 once everywhere


def test_conditions_may_differ_only_in_skill_and_checkpoint():
    records = run_evaluation(plan(task_ids=TASKS[:20]), runner_for)
    changed = [
        dataclasses.replace(r, identity=dataclasses.replace(r.identity, decoding="other"))
        if r.condition == "trained/S_T" else r
        for r in records
    ]  # fmt: skip
    with pytest.raises(IdentityMismatch, match="decoding differs"):
        task_table(changed, CONDITIONS, TASKS[:20])
    swapped = [
        dataclasses.replace(r, identity=identity("trained")) if r.condition == "base/bare" else r
        for r in records
    ]
    with pytest.raises(IdentityMismatch, match="checkpoint_id differs"):
        task_table(swapped, CONDITIONS, TASKS[:20])
    duplicate = [*records, dataclasses.replace(records[0], attempt=3)]
    with pytest.raises(PairingError, match="2 completed records"):
        task_table(duplicate, CONDITIONS, TASKS[:20])
    with pytest.raises(IdentityMismatch, match="evaluation backend"):
        run_evaluation(plan(task_ids=TASKS[:5]), lambda c: runner_for("base"))


def test_report_cli_recomputes_from_the_folder(tmp_path, capsys):
    planned = plan(task_ids=TASKS[:100], resamples=500)
    write_plan(planned, tmp_path)
    run_evaluation(planned, runner_for, on_record=RecordLog(tmp_path / "records.jsonl"))
    assert (
        evaluate_cli.main(["report", str(tmp_path), "--json", "--plot", str(tmp_path / "p.png")])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["n_tasks"] == 100 and report["bootstrap"]["resamples"] == 500
    assert (tmp_path / "p.png").exists()
    assert evaluate_cli.main(["report", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "trained/S_T - trained/bare" in table and "percentile bootstrap" in table
    assert evaluate_cli.main(["report", str(tmp_path / "missing")]) == 1


def test_identical_conditions_are_rolled_out_once_and_labelled():
    """An empty S_0 makes base/S0 the base/bare condition: one set of rollouts, difference 0."""
    conditions = (
        Condition("base/bare", "base"),
        Condition("base/S0", "base", bank_id=9),  # the empty bank: no chunk injected
        Condition("trained/bare", "trained"),
    )
    records = run_evaluation(plan(conditions=conditions, task_ids=TASKS[:50]), runner_for)
    assert len(records) == 2 * 50  # base/S0 was not rolled out again
    report = evaluation_report(records, conditions, TASKS[:50], resamples=500)
    assert report["conditions"]["base/S0"]["identical_to"] == "base/bare"
    assert report["conditions"]["base/bare"]["identical_to"] is None
    same = next(c for c in report["comparisons"] if c["b"] == "base/bare" and c["a"] == "base/S0")
    assert same["kind"] == "identical"
    assert same["differences"]["r_success"] == {
        "estimate": 0.0, "low": 0.0, "high": 0.0, "p": 1.0, "note": ALL_ZERO_NOTE
    }  # fmt: skip
    trained = next(c for c in report["comparisons"] if c["a"] == "trained/bare")
    assert trained["kind"] == "contrast"


def test_an_aa_condition_resamples_and_gets_its_own_row():
    """The same condition with another sampling index: other episodes, an A/A row by default."""
    conditions = (
        Condition("base/bare", "base"),
        Condition("trained/bare", "trained"),
        Condition("trained/bare#aa", "trained", sample=1),
    )
    records = run_evaluation(plan(conditions=conditions, task_ids=TASKS), runner_for)
    assert len(records) == 3 * len(TASKS)
    samples = {r.condition: r.sample for r in records}
    assert samples == {"base/bare": 0, "trained/bare": 0, "trained/bare#aa": 1}
    report = evaluation_report(records, conditions, TASKS, resamples=1000)
    aa = [c for c in report["comparisons"] if c["kind"] == "A/A"]
    assert [(c["a"], c["b"]) for c in aa] == [("trained/bare#aa", "trained/bare")]
    flips = aa[0]["flips"]
    assert flips["fail_to_success"] + flips["success_to_fail"] > 0  # other draws, not a copy
    diff = aa[0]["differences"]["r_strict"]
    assert diff["low"] < 0 < diff["high"]  # one condition: the interval covers 0
    per_task = report["per_task"]
    assert per_task["task_ids"] == list(TASKS)
    assert len(per_task["columns"]["trained/bare#aa"]["r_success"]) == len(TASKS)
