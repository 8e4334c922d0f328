"""`intraskill env ...`: score reward vectors, build and inspect worlds, play, run agents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise typer.BadParameter(f"cannot read {path}: {error}") from error
    if not isinstance(data, list):
        raise typer.BadParameter(f"{path} must hold a JSON array of vectors")
    return data


def _matches(expected: Any, got: Any) -> bool:
    if isinstance(expected, float) and isinstance(got, int | float) and not isinstance(got, bool):
        return abs(expected - got) <= 1e-9
    return expected == got


@app.command("reward-cases")
def reward_cases(
    file: Annotated[Path, typer.Argument(help="vectors in the cases.json format")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Compute the reward of every vector (title_terms_override and explicit_price honoured)."""
    from shared.runtime.shopsim.reward.cases import case_output, evaluate_case

    failures = 0
    for case in _read_json_list(file):
        if as_json:
            print(json.dumps(case_output(case), ensure_ascii=False))
            continue
        full = evaluate_case(case)
        expected = {**case.get("expected", {}), **case.get("derived_expected", {})}
        wrong = [
            f"{key}: want {value!r} got {full.get(key)!r}"
            for key, value in expected.items()
            if key in full and not _matches(value, full[key])
        ]
        failures += bool(wrong)
        status = "FAIL " + "; ".join(wrong) if wrong else "ok"
        scores = f"r_strict={full['r_strict']:.4g} r_success={full['r_success']}"
        print(f"{full['name']}: {scores} {status}")
    if failures:
        raise typer.Exit(1)


@app.command("budget-cases")
def budget_cases(
    file: Annotated[Path, typer.Argument(help="vectors in the budget_cases.json format")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Evaluate goal-budget vectors (instruction text to price_upper)."""
    from shared.runtime.shopsim.reward.cases import evaluate_budget_case

    failures = 0
    for case in _read_json_list(file):
        got = evaluate_budget_case(case)
        if as_json:
            print(json.dumps({"name": case.get("name"), **got}, ensure_ascii=False))
            continue
        expected = {**case.get("expected", {}), **case.get("derived_expected", {})}
        wrong = [k for k, v in expected.items() if k in got and got[k] != v]
        failures += bool(wrong)
        print(f"{case.get('name')}: price_upper={got['price_upper']!r} {'FAIL' if wrong else 'ok'}")
    if failures:
        raise typer.Exit(1)


@app.command()
def build(
    out: Annotated[Path, typer.Option(help="folder to write products.json, splits.json, ...")],
    preset: Annotated[str, typer.Option(help="paper, cpu or test")] = "cpu",
    seed: Annotated[int, typer.Option()] = 20260830,
    products: Annotated[int, typer.Option(help="catalogue size override (0: preset's)")] = 0,
) -> None:
    """Generate a world and write it in the public ShopSimulator layout plus split files."""
    from shared.runtime.shopsim.loader import write_world
    from shared.runtime.shopsim.presets import build_world

    world = build_world(preset, seed, products=products or None)
    manifest = write_world(world, out)
    print(json.dumps(manifest, indent=2))


@app.command()
def info(
    preset: Annotated[str, typer.Option()] = "test",
    path: Annotated[Path | None, typer.Option(help="a built or public data folder")] = None,
) -> None:
    """Version string, split sizes and hashes of a world."""
    env = _env(preset, path)
    print(json.dumps({"version": env.version, **env.world.manifest()}, indent=2))


def _env(preset: str, path: Path | None):
    from shared.runtime.shopsim.env import ShopEnv

    return ShopEnv.load(str(path)) if path else ShopEnv.from_preset(preset)


@app.command()
def play(
    task: Annotated[str, typer.Option(help="task id (default: the first val task)")] = "",
    preset: Annotated[str, typer.Option()] = "test",
    path: Annotated[Path | None, typer.Option()] = None,
    actions: Annotated[str, typer.Option(help="';'-separated actions; else read stdin")] = "",
    show_goal: Annotated[bool, typer.Option(help="also print the private goal")] = False,
) -> None:
    """Play one episode as text: actions from --actions or one per line on stdin."""
    env = _env(preset, path)
    task_id = task or env.task_ids("val")[0]
    episode, result = env.reset(task_id)
    print(f"Task {task_id}: {episode.task.instruction}")
    print("Persona: " + json.dumps(episode.task.persona, ensure_ascii=False))
    if show_goal:
        print("Goal: " + json.dumps(env.task(task_id).goal().__dict__, ensure_ascii=False))
    print(result.observation)
    source = actions.split(";") if actions else (line.rstrip("\n") for line in sys.stdin)
    for action in source:
        if not action.strip():
            continue
        result = episode.step(action.strip())
        print(f"> {action.strip()}\n{result.observation}")
        if result.done:
            print(json.dumps(result.breakdown.__dict__ if result.breakdown else {}, indent=2))
            break


@app.command()
def agents(
    preset: Annotated[str, typer.Option()] = "test",
    path: Annotated[Path | None, typer.Option()] = None,
    agent: Annotated[str, typer.Option(help="oracle, heuristic or both")] = "both",
    limit: Annotated[int, typer.Option(help="tasks per split (0: all)")] = 0,
    out: Annotated[Path | None, typer.Option(help="write the figures as JSON")] = None,
) -> None:
    """Success rates of the oracle and heuristic agents per split and difficulty."""
    from shared.runtime.shopsim.agents import AGENTS, evaluate_agent

    env = _env(preset, path)
    names = list(AGENTS) if agent == "both" else [agent]
    report = {"version": env.version}
    for name in names:
        report[name] = evaluate_agent(env, name, limit=limit)
        for split, groups in report[name].items():
            for group, row in groups.items():
                print(
                    f"{name:9} {split:5} {group:6} n={row['episodes']:4} "
                    f"success={row['success']:.3f} r_strict={row['r_strict']:.3f} "
                    f"steps={row['steps']:.1f}"
                )
    if out:
        out.write_text(json.dumps(report, indent=2))


@app.command("turn-caps")
def turn_caps(
    preset: Annotated[str, typer.Option(help="paper, cpu or test")] = "cpu",
    path: Annotated[Path | None, typer.Option()] = None,
    caps: Annotated[str, typer.Option(help="comma-separated turn caps")] = "3,4,5,6,7,8,10,30",
    out: Annotated[Path | None, typer.Option(help="write the table as JSON")] = None,
) -> None:
    """The oracle's step counts and both agents' success per turn cap (sizes a preset's cap)."""
    from shared.runtime.shopsim.agents import turn_cap_table

    try:
        cap_list = tuple(int(value) for value in caps.split(","))
    except ValueError:
        raise typer.BadParameter(
            f"--caps must be integers separated by commas, got {caps!r}"
        ) from None
    if any(cap < 1 for cap in cap_list):
        raise typer.BadParameter("every turn cap must be >= 1")
    env = _env(preset, path)
    table = turn_cap_table(env, cap_list)
    for split, row in table.items():
        print(f"{split}: {row['tasks']} tasks; oracle steps (uncapped): {row['oracle_steps']}")
        for cap, rates in row["success_by_cap"].items():
            cells = "  ".join(f"{name} {rate:.1%}" for name, rate in rates.items())
            print(f"  cap {cap:>2}: {cells}")
    if out:
        out.write_text(json.dumps({"version": env.version, "splits": table}, indent=2) + "\n")


def main(argv: list[str]) -> int:
    try:
        code = app(args=argv, prog_name="intraskill env", standalone_mode=False)
    except typer.Exit as done:
        return int(done.exit_code or 0)
    except (typer.BadParameter, typer.Abort) as error:
        print(f"intraskill env: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # click usage errors
        import click

        if isinstance(error, click.ClickException):
            error.show()
            return error.exit_code
        raise
    return code if isinstance(code, int) else 0
