"""`intraskill experiment run` end to end with the procedural TEST DOUBLE through every arm,
2 seeds: real processes, real HTTP. Its figures are mechanics, never the method's result.

Expected values come from the issue's arm definitions (grpo: never a skill block and no gate;
fixed-s0: S_0 and no gate; no-mask: q = 0 and every chunk always shown; no-gate: candidates
admitted untested; q=0.5: the skill-free probability 0.5), and from the scale of
`experiment-tiny.toml` (2 rounds of 1 step, 20 test tasks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.run_support import environment

HERE = Path(__file__).parent
REPO = HERE.parents[1]
ARMS = ["intraskill", "grpo", "fixed-s0", "no-mask", "no-gate", "q=0.5"]
SEEDS, ROUNDS, TEST_TASKS = 2, 2, 20


def command(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "shared.apps.cli", "experiment", *extra,
    ] if extra and extra[0] == "report" else [
        sys.executable, "-m", "shared.apps.cli", "experiment", "run",
        "--config", str(HERE / "experiment-tiny.toml"),
        "--policy", "procedural",
        "--arms", ",".join(ARMS),
        "--seeds", str(SEEDS),
        "--rounds", str(ROUNDS),
        "--cold-start-tasks", "8",
        "--test-tasks", str(TEST_TASKS),
        "--out", str(out),
    ]  # fmt: skip


def metric_lines(out: Path, run: str) -> list[dict]:
    text = (out / "runs" / run / "train" / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.slow
def test_every_arm_with_two_seeds_through_the_procedural_double(tmp_path):
    out = tmp_path / "exp"
    done = subprocess.run(
        command(out), cwd=REPO, env=environment(), capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["policy_is_test_double"] is True
    assert list(comparison["arms"]) == ARMS
    runs = {run["name"]: run for run in comparison["runs"]}
    assert len(runs) == len(ARMS) * SEEDS
    # arms share everything not overridden: the same seeds, the same test tasks
    assert {tuple(a["seeds"]) for a in comparison["arms"].values()} == {(20260901, 20260902)}
    assert comparison["n_tasks"] == TEST_TASKS
    fingerprints = [a["fingerprint"] for a in comparison["arms"].values()]
    assert all(isinstance(f, str) for f in fingerprints)  # one per arm, whatever the seed
    assert len(set(fingerprints)) == len(ARMS)

    config = {name: a["effective_config"] for name, a in comparison["arms"].items()}
    assert config["grpo"]["skill_loop"] is False and config["fixed-s0"]["skill_loop"] is False
    assert config["no-mask"]["mask"] is False and config["no-gate"]["gate"]["admit"] == "all"
    assert config["q=0.5"]["q"] == 0.5 and config["intraskill"]["q"] == 0.2

    for seed in range(SEEDS):
        grpo = metric_lines(out, f"grpo-seed{seed}")
        assert {line["rho_mean"] for line in grpo} == {None}  # never a chunk to show
        assert {line["bank_id"] for line in grpo} == {
            runs[f"grpo-seed{seed}"]["rounds"][0]["bank_id"]
        }
        for arm in ("grpo", "fixed-s0"):
            rounds = runs[f"{arm}-seed{seed}"]["rounds"]
            assert {r["gate_status"] for r in rounds} == {"skipped: skill loop off (ablation)"}
            assert {r["candidates"] for r in rounds} == {0}  # no slow loop
        fixed = runs[f"fixed-s0-seed{seed}"]["rounds"]
        assert (
            fixed[0]["bank_id"]
            == fixed[-1]["next_bank_id"]
            == runs[f"intraskill-seed{seed}"]["rounds"][0]["bank_id"]
        )
        no_mask = metric_lines(out, f"no-mask-seed{seed}")
        assert {line["q"] for line in no_mask} == {0.0}
        assert {line["skill_free_group_rate"] for line in no_mask} == {0.0}
        assert {line["rho_min"] for line in no_mask if line["rho_min"] is not None} <= {1.0}
        assert {line["q"] for line in metric_lines(out, f"q0.5-seed{seed}")} == {0.5}
        for r in runs[f"no-gate-seed{seed}"]["rounds"]:
            if r["candidates"]:
                assert r["gate_status"] == "skipped: admitted without a gate (ablation)"
                assert r["adopted"]  # untested, and still adopted
                # additions grow the bank; rewrites take their target's place
                assert r["bank_size"] <= r["next_bank_size"] <= r["bank_size"] + r["candidates"]
            assert not r["gate_status"].startswith("complete")

    # grpo's final bank is empty: its "with bank" condition is its bare one, evaluated once (as
    # the bare condition, or as the condition that one was itself rolled out as)
    test = json.loads((out / "test" / "evaluation.json").read_text())["conditions"]
    for seed in range(SEEDS):
        bank, bare = test[f"grpo/s{seed}/bank"], test[f"grpo/s{seed}/bare"]
        assert bank["identical_to"] in (f"grpo/s{seed}/bare", bare.get("identical_to"))
    kinds = [(c["kind"], c["a"], c["b"], c["policy"]) for c in comparison["comparisons"]]
    # an A/A row per arm (its seeds pooled) and the bare one
    assert [k[1:] for k in kinds if k[0] == "A/A"] == [("base/bare/aa", "base/bare", "bare")] + [
        (f"{arm}/aa", arm, "bank") for arm in ARMS
    ]
    arm_rows = [c for c in comparison["comparisons"] if c["kind"] != "A/A"]
    assert len(arm_rows) == 2 * (len(ARMS) - 1)  # each arm against the first, bank and bare
    for row in arm_rows:  # a contrast is tested (Holm) and sized (MDE); identical says why
        if row["kind"] == "contrast":
            assert row["adjusted"]["method"] == "holm" and "reject" in row["adjusted"]["r_success"]
            assert row["mde"]["r_success"] > 0
        else:
            assert row["identical"] in ("by construction", "by outcome")
    assert comparison["power"]["mde"]["r_success"] > 0

    markdown = (out / "comparison.md").read_text()
    assert "TEST DOUBLE" in markdown and "(A/A: one condition, other sampling seeds)" in markdown
    assert "## What this experiment can detect" in markdown
    for figure in ("learning-curves", "test-success", "banks"):
        path = out / "figures" / f"{figure}.png"
        assert path.stat().st_size > 10_000
        path.unlink()
    redraw = subprocess.run(
        command(out, "report", str(out)),
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
    )
    assert redraw.returncode == 0, redraw.stderr
    assert (out / "figures" / "banks.png").is_file()


@pytest.mark.slow
def test_rotated_gates_and_the_confirmation_step(tmp_path):
    """gate.val_policy = rotate: each round's gate on its own disjoint validation tasks (the
    registry's observations say which); the final bank measured once on held-out tasks."""
    import sqlite3
    import tomllib

    import tomli_w

    config = tomllib.loads((HERE / "experiment-tiny.toml").read_text())
    # the test world's 20 validation tasks: Gate A 0-5, the rotated pool 6-17, confirmation 18-19
    config["gate"] |= {"val_tasks": 6, "val_policy": "rotate", "val_pool": 12, "confirm_tasks": 2}
    path = tmp_path / "rotate.toml"
    path.write_text(tomli_w.dumps(config))
    out = tmp_path / "exp"
    argv = command(out)
    argv[argv.index("--config") + 1] = str(path)
    argv[argv.index("--arms") + 1] = "intraskill"
    argv[argv.index("--seeds") + 1] = "1"
    done = subprocess.run(
        argv, cwd=REPO, env=environment(), capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, done.stderr[-3000:]

    record = json.loads((out / "runs" / "intraskill-seed0" / "train" / "run.json").read_text())
    confirm = record["validation"]["confirmation_task_ids"]
    rounds = [r.get("val_task_ids") or [] for r in record["rounds"] if r.get("gate_run_id")]
    assert rounds and all(len(ids) == 6 for ids in rounds)
    used = [t for ids in rounds for t in ids]
    assert len(set(used)) == len(used)  # disjoint across rounds
    assert len(confirm) == 2 and not set(confirm) & set(used)
    online = {r["gate_run_id"] for r in record["rounds"] if r.get("gate_run_id")}
    with sqlite3.connect(out / "registry.sqlite") as db:
        observed: dict[str, set[str]] = {}
        for gate_run_id, task_id in db.execute(
            "SELECT DISTINCT gate_run_id, task_id FROM gate_observations"
        ):
            observed.setdefault(str(gate_run_id), set()).add(task_id)
    for r in record["rounds"]:
        if r.get("gate_run_id"):
            assert observed[str(r["gate_run_id"])] == set(r["val_task_ids"])
    gate_a = set().union(*(t for g, t in observed.items() if g not in map(str, online)))
    assert gate_a and not gate_a & (set(used) | set(confirm))  # Gate A's slice is its own

    comparison = json.loads((out / "comparison.json").read_text())
    [row] = comparison["confirmation"]
    assert row["val_policy"] == "rotate" and row["n_tasks"] == 2
    assert {"estimate", "low", "high", "p"} <= set(row["confirmation"])
    assert "Gate estimate vs confirmation" in (out / "comparison.md").read_text()


@pytest.mark.slow
def test_two_samples_per_test_task_reach_the_evaluator_and_the_evidence(tmp_path):
    """`--test-samples 2`: every test condition is rolled out twice per task under its own seeds,
    and evidence.json and comparison.json read the per-task means (procedural TEST DOUBLE)."""
    out = tmp_path / "exp"
    argv = command(out)
    argv[argv.index("--arms") + 1], argv[argv.index("--seeds") + 1] = "intraskill", "1"
    argv[argv.index("--rounds") + 1] = "1"
    argv[argv.index("--test-tasks") + 1] = "6"
    done = subprocess.run(
        [*argv, "--test-samples", "2"], env=environment(), capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    trained = json.loads((out / "test" / "trained-evaluation.json").read_text())
    assert {"intraskill/s0/bank/sample1", "intraskill/s0/bank/aa/sample1"} <= set(
        trained["per_task"]["columns"]
    )
    evidence = json.loads((out / "evidence.json").read_text())
    assert evidence["test"]["samples"] == 2 and evidence["test"]["n_tasks"] == 6
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["samples"] == 2
