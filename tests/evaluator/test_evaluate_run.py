"""`intraskill evaluate run` end to end: the live registry, the procedural policy (a TEST DOUBLE
of the model) on the test world, the four conditions and the A/A copy of one of them."""

import json
import uuid

import pytest
from gate_service_support import client, content

from services.evaluator import evaluate_cli
from services.evaluator.evaluate_cli import evaluation_conditions
from services.evaluator.gate_job import read_records
from shared.runtime.shopsim.env import ShopEnv

N_TASKS = 20  # the whole test split of the test world


@pytest.fixture
def trained_world(registry_url, monkeypatch):
    """Two checkpoints, a frozen S_0 and S_T, and the evaluator's settings pointed at them."""
    tag = uuid.uuid4().hex[:6]
    analyst, evaluator, trainer = (
        client(registry_url, r) for r in ("analyst", "evaluator", "trainer")
    )
    checkpoints = {}
    for name, step in (("base", 0), ("trained", 40)):
        checkpoints[name] = f"{name}-{tag}"
        trainer.create_checkpoint(
            checkpoints[name], uri=f"file:///weights/{name}-{tag}", step=step, round=0
        )
    banks = {}
    for name in ("s0", "st"):
        chunk = analyst.create_chunk(f"{name}-{tag}", content(f"{name}-{tag}"))
        bank = evaluator.create_bank([{"chunk_version_id": chunk.latest.id, "rho": 0.5}])
        evaluator.freeze_bank(bank.id)
        banks[name] = bank.id
    for c in (analyst, evaluator, trainer):
        c.close()
    settings = {
        "REGISTRY_URL": registry_url,
        "REGISTRY_TOKEN": evaluator_token(),
        "BACKEND": "procedural",
        "BACKEND_OPTIONS": json.dumps({"slip": 0.5}),  # the seeds decide which results it opens
        "ENV_PRESET": "test",
    }
    for key, value in settings.items():
        monkeypatch.setenv(f"EVALUATOR_{key}", value)
    return {**checkpoints, **banks}


def evaluator_token() -> str:
    from registry_server import TOKENS

    return TOKENS["evaluator"]


def run(world, out, *extra: str) -> int:
    argv = [
        "run", "--base", world["base"], "--trained", world["trained"],
        "--s0-bank", str(world["s0"]), "--final-bank", str(world["st"]),
        "--n-tasks", str(N_TASKS), "--resamples", "200", "--out", str(out), *extra,
    ]  # fmt: skip
    return evaluate_cli.main(argv)


def test_the_aa_copy_draws_its_own_rollouts_and_its_row_says_aa(
    trained_world, tmp_path, capsys, monkeypatch
):
    resets: dict[str, set[int]] = {}  # task -> the seeds its shop episodes started from
    reset = ShopEnv.reset

    def recorded_reset(self, task_id, seed=0):
        resets.setdefault(task_id, set()).add(seed)
        return reset(self, task_id, seed)

    monkeypatch.setattr(ShopEnv, "reset", recorded_reset)
    assert run(trained_world, tmp_path) == 0
    printed = capsys.readouterr().out
    records = read_records(tmp_path / "records.jsonl")
    by_condition: dict[str, list] = {}
    for record in records:
        by_condition.setdefault(record.condition, []).append(record)
    # five conditions, each rolled out on its own: the copy is not folded into base/bare
    assert sorted(by_condition) == sorted(
        ["base/bare", "base/S0", "trained/bare", "trained/S_T", "base/bare/aa"]
    )
    assert {len(group) for group in by_condition.values()} == {N_TASKS}
    assert {r.sample for r in by_condition["base/bare"]} == {0}
    assert {r.sample for r in by_condition["base/bare/aa"]} == {1}
    # other sampling seeds: every task's shop starts from two seeds (the paired conditions
    # share one), and the same policy on the same tasks walks other episodes
    assert len(resets) == N_TASKS and all(len(seeds) == 2 for seeds in resets.values())
    report = json.loads((tmp_path / "evaluation.json").read_text())
    columns = report["per_task"]["columns"]
    assert columns["base/bare/aa"]["steps"] != columns["base/bare"]["steps"]
    assert report["conditions"]["base/bare/aa"]["identical_to"] is None
    [aa] = [c for c in report["comparisons"] if c["kind"] == "A/A"]
    assert (aa["a"], aa["b"]) == ("base/bare/aa", "base/bare")
    assert [c["kind"] for c in report["comparisons"] if c is not aa] == ["contrast"] * 4
    # the table's row says so too (rich may wrap the rest of the note onto a second line)
    assert "│ base/bare/aa - base/bare (A/A: one condition" in printed


def test_no_aa_and_another_aa_condition(trained_world, tmp_path):
    assert run(trained_world, tmp_path / "none", "--no-aa") == 0
    report = json.loads((tmp_path / "none" / "evaluation.json").read_text())
    assert len(report["conditions"]) == 4
    assert all(c["kind"] != "A/A" for c in report["comparisons"])
    assert run(trained_world, tmp_path / "st", "--aa-of", "trained/S_T") == 0
    report = json.loads((tmp_path / "st" / "evaluation.json").read_text())
    aa = report["conditions"]["trained/S_T/aa"]
    assert (aa["bank_id"], aa["sample"]) == (trained_world["st"], 1)
    assert aa["chunks"] == report["conditions"]["trained/S_T"]["chunks"]
    assert [(c["a"], c["b"]) for c in report["comparisons"] if c["kind"] == "A/A"] == [
        ("trained/S_T/aa", "trained/S_T")
    ]


def test_the_aa_copy_is_the_condition_under_another_sampling_index():
    final = {"bank_alias": "current"}
    conditions = evaluation_conditions(
        base="b", trained="t", s0_bank=3, final=final, aa_of="trained/S_T"
    )
    assert conditions[-1] == {
        "name": "trained/S_T/aa", "checkpoint_id": "t", "bank_alias": "current", "sample": 1
    }  # fmt: skip
    assert conditions[:4] == evaluation_conditions(
        base="b", trained="t", s0_bank=3, final=final, aa_of=None
    )
    assert all("sample" not in c for c in conditions[:4])
    with pytest.raises(ValueError, match="not 'trained'"):
        evaluation_conditions(base="b", trained="t", s0_bank=3, final=final, aa_of="trained")


def test_an_unknown_aa_condition_is_refused_before_any_rollout(tmp_path):
    argv = ["run", "--base", "b", "--trained", "t", "--s0-bank", "1", "--aa-of", "base"]
    assert evaluate_cli.main([*argv, "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "records.jsonl").exists()


def test_more_tasks_than_the_split_holds_is_a_usage_error_not_a_traceback(
    trained_world, tmp_path, capsys
):
    assert run(trained_world, tmp_path, "--n-tasks", str(N_TASKS + 1)) == 2
    err = capsys.readouterr().err
    assert f"only {N_TASKS} tasks available" in err and "Traceback" not in err
    assert not (tmp_path / "records.jsonl").exists()
