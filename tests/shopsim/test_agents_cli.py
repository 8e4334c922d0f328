"""Reference agents (the oracle proves solvability) and the `intraskill env` commands."""

from __future__ import annotations

import dataclasses
import json

import pytest

from shared.apps.cli import main as intraskill
from shared.runtime.shopsim.agents import (
    OracleAgent,
    evaluate_agent,
    heuristic_factory,
    run_episode,
)
from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.reward.cases import CASE_OUTPUT_KEYS, case_output
from shared.runtime.shopsim.types import TaskView
from tests.shopsim.conftest import FIXTURES, load_fixture


def test_oracle_solves_at_least_99_percent(env: ShopEnv) -> None:
    report = evaluate_agent(env, "oracle")
    for split in ("train", "val", "test"):
        assert report[split]["all"]["success"] >= 0.99, split


def test_heuristic_sees_only_the_policy_view(env: ShopEnv) -> None:
    # What a policy may see of a task, as the method fixes it: the instruction and the persona.
    assert {f.name for f in dataclasses.fields(TaskView)} == {
        "task_id",
        "split",
        "instruction",
        "persona",
    }
    task_id = env.task_ids("val")[0]
    agent = heuristic_factory(env, task_id)
    assert type(agent.view) is TaskView
    record = run_episode(env, task_id, agent)
    assert record.breakdown is not None and 1 <= record.steps <= 30


def test_agent_report_is_the_mean_over_episodes(env: ShopEnv) -> None:
    task_ids = env.task_ids("val")[:10]
    records = [run_episode(env, task_id, heuristic_factory(env, task_id)) for task_id in task_ids]
    report = evaluate_agent(env, "heuristic", splits=("val",), limit=10)
    assert set(report) == {"val"}
    assert report["val"]["all"] == {
        "episodes": 10,
        "success": pytest.approx(sum(r.success for r in records) / 10),
        "r_strict": pytest.approx(sum(r.reward for r in records) / 10),
        "steps": pytest.approx(sum(r.steps for r in records) / 10),
    }
    by_difficulty = {key: value for key, value in report["val"].items() if key != "all"}
    assert sum(group["episodes"] for group in by_difficulty.values()) == 10


def test_oracle_wrong_option_fails(env: ShopEnv) -> None:
    """A counterfactual: the gold bought with a different value on a goal axis scores 0."""
    for task_id in env.task_ids("train"):
        task = env.task(task_id)
        product = env.world.catalog[task.gold_asin]
        axes = dict(product.rendered_options())
        if task.option_axes and len(axes[task.option_axes[0]]) > 1:
            break
    else:
        pytest.skip("no task with a switchable goal option")
    axis = task.option_axes[0]
    other = next(v for v in axes[axis] if v != task.gold_options[axis])
    agent = OracleAgent(task)
    agent.task = type(task)(**{**task.__dict__, "gold_options": {**task.gold_options, axis: other}})
    record = run_episode(env, task_id, agent)
    assert record.breakdown.target_asin_match and record.breakdown.r_success == 0


def test_cli_reward_cases_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "cases.json"
    assert intraskill(["env", "reward-cases", str(path), "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    cases = load_fixture("cases.json")
    assert len(lines) == len(cases)
    for line, case in zip(lines, cases, strict=True):
        row = json.loads(line)
        assert list(row) == ["name", *CASE_OUTPUT_KEYS]
        assert row == json.loads(json.dumps(case_output(case)))
    assert intraskill(["env", "reward-cases", str(path)]) == 0


def test_cli_budget_cases_and_errors(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    path = FIXTURES / "budget_cases.json"
    assert intraskill(["env", "budget-cases", str(path)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert intraskill(["env", "reward-cases", str(bad), "--json"]) == 2
    wrong = tmp_path / "wrong.json"
    case = load_fixture("cases.json")[0]
    case["expected"] = {"r_strict": 0.5}
    wrong.write_text(json.dumps([case]))
    assert intraskill(["env", "reward-cases", str(wrong)]) == 1


def test_cli_play_and_info(capsys: pytest.CaptureFixture[str], env: ShopEnv) -> None:
    task_id = env.task_ids("val")[0]
    task = env.task(task_id)
    actions = [f"search[{task.gold_title}]", f"click[{task.gold_asin}]"]
    actions += [f"click[{a}={v}]" for a, v in task.gold_options.items()] + ["click[buy now]"]
    assert intraskill(["env", "play", "--task", task_id, "--actions", ";".join(actions)]) == 0
    out = capsys.readouterr().out
    assert '"r_success": 1' in out
    assert intraskill(["env", "info", "--preset", "test"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == env.version


def test_a_turn_cap_cuts_the_episode_and_scores_it_zero(env: ShopEnv) -> None:
    """The runtime's rule: an episode cut at the cap before `buy now` is unfinished, reward 0."""
    task_id = next(
        task_id
        for task_id in env.task_ids("val")
        if run_episode(env, task_id, OracleAgent(env.task(task_id))).steps == 5
    )
    cut = run_episode(env, task_id, OracleAgent(env.task(task_id)), max_turns=4)
    assert (len(cut.actions), cut.reward, cut.success) == (4, 0.0, False)
    fits = run_episode(env, task_id, OracleAgent(env.task(task_id)), max_turns=5)
    assert fits.success and len(fits.actions) == 5


def test_turn_cap_table_counts_the_oracles_fewest_turns(env: ShopEnv) -> None:
    from shared.runtime.shopsim.agents import turn_cap_table

    table = turn_cap_table(env, (1, 30), splits=("val",))["val"]
    tasks = len(env.task_ids("val"))
    assert sum(table["oracle_steps"].values()) == tasks  # the oracle solves every task uncapped
    # No protocol buys in one turn (a search must come first); uncapped, the oracle always wins.
    assert table["success_by_cap"]["1"] == {"oracle": 0.0, "heuristic": 0.0}
    assert table["success_by_cap"]["30"]["oracle"] == 1.0
    fewest = min(int(n) for n in table["oracle_steps"])
    below = turn_cap_table(env, (fewest - 1,), splits=("val",))["val"]["success_by_cap"]
    assert below[str(fewest - 1)]["oracle"] == 0.0


def test_turn_caps_command_prints_every_cap(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    out = tmp_path / "caps.json"
    assert (
        intraskill(["env", "turn-caps", "--preset", "test", "--caps", "4,6", "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "cap  4:" in printed and "cap  6:" in printed
    assert set(json.loads(out.read_text())["splits"]) == {"train", "val", "test"}
    assert intraskill(["env", "turn-caps", "--preset", "test", "--caps", "0"]) == 2
