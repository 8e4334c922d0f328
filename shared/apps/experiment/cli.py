"""`intraskill experiment`: ablation arms x training seeds on the same tasks, compared by task.

    intraskill experiment run --config configs/procedural.toml --policy procedural \\
        --arms intraskill,grpo,fixed-s0,no-mask,no-gate,q=0.5 --seeds 2 --out runs/exp-proc
    intraskill experiment run --config configs/cpu.toml --arms intraskill,grpo,fixed-s0 \\
        --seeds 1 --out runs/exp-smollm2             # SmolLM2 on this CPU: hours
    intraskill experiment report runs/exp-proc        # redraw comparison.md and the figures
    intraskill experiment run --config configs/experiment-paper.toml --out runs/exp-paper
    intraskill experiment estimate --config configs/experiment-paper.toml   # GPU-hours, MDE

A rerun of the same `run` resumes: finished runs are skipped, a stopped one continues from its
last checkpoint. Arms: see `shared/apps/experiment/arms.py` and docs/experiments.md.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from shared.apps.operator.common import run_app

app = typer.Typer(
    name="experiment",
    help="ablation arms x seeds, each a `train run`, compared on the same test tasks",
    no_args_is_help=True,
    add_completion=False,
)


@dataclass(frozen=True)
class Plan:
    """What to run: a trainer TOML and the experiment's choices (command line over plan file)."""

    base: Path
    arms: str
    seeds: int
    policy: str
    rounds: int
    cold_start_tasks: int
    test_tasks: int
    warm_start_eval_tasks: int | None = None  # None: the base TOML's [warm_start] eval_tasks
    warm_start_reading_hints: float | None = None  # None: the base TOML's [warm_start] share
    test_samples: int = 1  # sampled episodes per test task, pooled per task (samples.py)


DEFAULTS = {
    "arms": "intraskill,grpo,fixed-s0",
    "seeds": 1,
    "policy": "model",
    "rounds": 2,
    "cold_start_tasks": 32,
    "test_tasks": 40,
    "warm_start_eval_tasks": None,
    "warm_start_reading_hints": None,
    "test_samples": 1,
}


def load_plan(config: Path, **given: Any) -> Plan:
    """`config` is a trainer TOML, or an experiment plan whose `[experiment]` table names one
    (`base`, relative to the plan) and sets defaults for the other options."""
    data = tomllib.loads(config.read_text())
    plan = dict(data.get("experiment") or {})
    base = config.parent / plan.pop("base") if "base" in plan else config
    if isinstance(plan.get("arms"), list):
        plan["arms"] = ",".join(plan["arms"])
    unknown = sorted(set(plan) - set(DEFAULTS))
    if unknown:
        raise typer.BadParameter(f"unknown [experiment] keys: {unknown}", param_hint="--config")
    values = {**DEFAULTS, **plan, **{k: v for k, v in given.items() if v is not None}}
    if not (isinstance(values["test_samples"], int) and values["test_samples"] >= 1):
        raise typer.BadParameter(
            f"test_samples must be a whole number >= 1, got {values['test_samples']!r}",
            param_hint="--config",
        )
    return Plan(base=base, **values)


ConfigOption = Annotated[
    # rich reads "[experiment]" as a style tag and drops it: the backslash keeps it text
    Path,
    typer.Option(help="a trainer TOML, or an experiment plan (\\[experiment] with base = ...)"),
]
ArmsOption = Annotated[
    str | None, typer.Option(help="comma-separated arms, the first the reference (default: plan)")
]
SeedsOption = Annotated[int | None, typer.Option(min=1, help="training seeds per arm")]
TestTasksOption = Annotated[
    int | None, typer.Option(min=1, help="test tasks, shared by all (default: plan)")
]


@app.command()
def run(
    config: ConfigOption,
    out: Annotated[Path, typer.Option(help="experiment folder; a rerun resumes")],
    arms: ArmsOption = None,
    seeds: SeedsOption = None,
    policy: Annotated[
        str | None, typer.Option(help="model (warm-started) or procedural (a TEST DOUBLE)")
    ] = None,
    rounds: Annotated[int | None, typer.Option(min=1, help="training rounds per run")] = None,
    cold_start_tasks: Annotated[
        int | None, typer.Option(min=1, help="cold-start bare runs")
    ] = None,
    test_tasks: TestTasksOption = None,
    test_samples: Annotated[
        int | None, typer.Option(min=1, help="sampled episodes per test task (default: plan)")
    ] = None,
) -> None:
    """Run every arm x seed as its own `train run`, test them together, write the comparison."""
    from shared.apps.demo.display import DemoDisplay
    from shared.apps.demo.options import POLICY_DEFAULTS, DemoError, DemoOptions
    from shared.apps.experiment.run import Experiment

    plan = load_plan(
        config, arms=arms, seeds=seeds, policy=policy, rounds=rounds,
        cold_start_tasks=cold_start_tasks, test_tasks=test_tasks, test_samples=test_samples,
    )  # fmt: skip
    if plan.policy not in POLICY_DEFAULTS:
        raise typer.BadParameter("choose model or procedural", param_hint="--policy")
    chosen = _arms(plan.arms)
    options = DemoOptions(
        policy=plan.policy,
        out=out,
        config=plan.base,
        rounds=plan.rounds,
        cold_start_tasks=plan.cold_start_tasks,
        test_tasks=plan.test_tasks,
        database_url=os.environ.get("DATABASE_URL"),
        warm_start_eval_tasks=plan.warm_start_eval_tasks,
        warm_start_reading_hints=plan.warm_start_reading_hints,
    )
    console = Console(stderr=True)
    if plan.policy != "model":
        console.print(f"[bold]policy: {plan.policy}, a TEST DOUBLE[/]: figures show mechanics only")
    signal.signal(signal.SIGTERM, _interrupt)
    base = tomllib.loads(plan.base.read_text())
    steps = len(chosen) * plan.seeds * plan.rounds * int(base.get("steps_per_round", 20))
    try:
        with DemoDisplay(steps, console) as display:
            Experiment(options, display, chosen, plan.seeds, plan.test_samples).run()
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/]: run the same command to resume from {out}")
        raise typer.Exit(130) from None
    except DemoError as error:
        console.print(f"[red]experiment stopped[/]: {error}")
        raise typer.Exit(1) from None
    print((out / "comparison.md").read_text())


@app.command()
def estimate(
    config: ConfigOption,
    arms: ArmsOption = None,
    seeds: SeedsOption = None,
    test_tasks: TestTasksOption = None,
) -> None:
    """GPU-hours and the smallest detectable difference (MDE) of the planned experiment, from
    named, sourced inputs: a summary on stderr, the whole estimate as JSON on stdout."""
    from shared.apps.experiment.budget import experiment_hours, summary

    plan = load_plan(config, arms=arms, seeds=seeds, test_tasks=test_tasks)
    base = tomllib.loads(plan.base.read_text())
    base["rounds"] = plan.rounds
    hours = experiment_hours(
        base,
        _arms(plan.arms),
        plan.seeds,
        test_tasks=plan.test_tasks,
        cold_start_tasks=plan.cold_start_tasks,
    )
    print(summary(hours), file=sys.stderr)
    print(json.dumps(hours, indent=1))


def _arms(text: str):
    from shared.apps.experiment.arms import ArmError, parse_arms

    try:
        return parse_arms(text)
    except ArmError as error:
        raise typer.BadParameter(str(error), param_hint="--arms") from None


@app.command()
def report(folder: Annotated[Path, typer.Argument(help="an experiment folder")]) -> None:
    """Redraw comparison.md and the figures from comparison.json."""
    from shared.apps.experiment.report import write_report

    if not (folder / "comparison.json").is_file():
        print(f"intraskill experiment report: no comparison.json in {folder}", file=sys.stderr)
        raise typer.Exit(1)
    print(write_report(folder).read_text())


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    return run_app(app, argv, "intraskill experiment")
