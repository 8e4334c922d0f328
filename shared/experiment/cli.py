"""`intraskill experiment`: ablation arms x training seeds on the same tasks, compared by task.

    intraskill experiment run --config configs/procedural.toml --policy procedural \\
        --arms intraskill,grpo,fixed-s0,no-mask,no-gate,q=0.5 --seeds 2 --out runs/exp-proc
    intraskill experiment run --config configs/cpu.toml --arms intraskill,grpo,fixed-s0 \\
        --seeds 1 --out runs/exp-smollm2             # SmolLM2 on this CPU: hours
    intraskill experiment report runs/exp-proc        # redraw comparison.md and the figures

A rerun of the same `run` resumes: finished runs are skipped, a stopped one continues from its
last checkpoint. Arms: see `shared/experiment/arms.py` and docs/experiments.md.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shared.operator.common import run_app

app = typer.Typer(
    name="experiment",
    help="ablation arms x seeds, each a `train run`, compared on the same test tasks",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def run(
    config: Annotated[Path, typer.Option(help="the base trainer TOML every arm overrides")],
    out: Annotated[Path, typer.Option(help="experiment folder; a rerun resumes")],
    arms: Annotated[
        str, typer.Option(help="comma-separated arms; the first is the reference")
    ] = "intraskill,grpo,fixed-s0",
    seeds: Annotated[
        int, typer.Option(min=1, help="training seeds per arm (seed, seed+1, ...)")
    ] = 1,
    policy: Annotated[
        str, typer.Option(help="model (warm-started) or procedural (a TEST DOUBLE)")
    ] = "model",
    rounds: Annotated[int, typer.Option(min=1, help="training rounds per run")] = 2,
    cold_start_tasks: Annotated[int, typer.Option(min=1, help="bare runs of the cold start")] = 32,
    test_tasks: Annotated[int, typer.Option(min=1, help="test tasks, the same for every arm")] = 40,
) -> None:
    """Run every arm x seed as its own `train run`, test them together, write the comparison."""
    from shared.demo.display import DemoDisplay
    from shared.demo.run import POLICY_DEFAULTS, DemoError, DemoOptions
    from shared.experiment.arms import ArmError, parse_arms
    from shared.experiment.run import Experiment

    if policy not in POLICY_DEFAULTS:
        raise typer.BadParameter("choose model or procedural", param_hint="--policy")
    try:
        chosen = parse_arms(arms)
    except ArmError as error:
        raise typer.BadParameter(str(error), param_hint="--arms") from None
    options = DemoOptions(
        policy=policy,
        out=out,
        config=config,
        rounds=rounds,
        cold_start_tasks=cold_start_tasks,
        test_tasks=test_tasks,
        database_url=os.environ.get("DATABASE_URL"),
    )
    console = Console(stderr=True)
    if policy != "model":
        console.print(f"[bold]policy: {policy}, a TEST DOUBLE[/]: figures show mechanics only")
    signal.signal(signal.SIGTERM, _interrupt)
    steps = len(chosen) * seeds * rounds * _steps_per_round(config)
    try:
        with DemoDisplay(steps, console) as display:
            Experiment(options, display, chosen, seeds).run()
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/]: run the same command to resume from {out}")
        raise typer.Exit(130) from None
    except DemoError as error:
        console.print(f"[red]experiment stopped[/]: {error}")
        raise typer.Exit(1) from None
    print((out / "comparison.md").read_text())


@app.command()
def report(folder: Annotated[Path, typer.Argument(help="an experiment folder")]) -> None:
    """Redraw comparison.md and the figures from comparison.json."""
    from shared.experiment.report import write_report

    if not (folder / "comparison.json").is_file():
        print(f"intraskill experiment report: no comparison.json in {folder}", file=sys.stderr)
        raise typer.Exit(1)
    print(write_report(folder).read_text())


def _steps_per_round(config: Path) -> int:
    import tomllib

    return int(tomllib.loads(config.read_text()).get("steps_per_round", 20))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    return run_app(app, argv, "intraskill experiment")
