"""`intraskill demo`: the whole system end to end on this machine, in one command.

    intraskill demo                          # SmolLM2 (warm-started), CPU preset, 2 rounds
    intraskill demo --policy procedural      # the skill-following TEST DOUBLE policy: minutes
    intraskill demo --out runs/demo-1        # a rerun of the same command resumes

Ctrl-C stops every process the demo started; running it again resumes where it stopped.
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from shared.apps.operator.common import run_app

app = typer.Typer(add_completion=False)


@app.command()
def demo(
    policy: Annotated[
        str,
        typer.Option(
            help="model (SmolLM2, warm-started) or procedural (a skill-following test double)"
        ),
    ] = "model",
    out: Annotated[
        Path | None, typer.Option(help="run folder (default: runs/demo-POLICY); rerun resumes")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="trainer TOML (default configs/cpu.toml; procedural: configs/procedural.toml)"
        ),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            min=1, help="training rounds, each ending in a gate (default 2; procedural 3)"
        ),
    ] = None,
    cold_start_tasks: Annotated[
        int | None,
        typer.Option(min=1, help="bare runs of the cold start (default 32; procedural 120)"),
    ] = None,
    test_tasks: Annotated[int, typer.Option(min=1, help="test tasks per condition")] = 40,
) -> None:
    """Registry, evaluator and analyst on loopback; warm start, cold start, training rounds with
    gates, the four-condition test; then summary.json and the report."""
    from shared.apps.demo.display import DemoDisplay
    from shared.apps.demo.options import POLICY_DEFAULTS, DemoError, DemoOptions, total_steps
    from shared.apps.demo.run import run_demo

    if policy not in POLICY_DEFAULTS:
        raise typer.BadParameter("choose model or procedural", param_hint="--policy")
    defaults = POLICY_DEFAULTS[policy]
    options = DemoOptions(
        policy=policy,
        out=out or Path("runs") / f"demo-{policy}",
        config=config or defaults.config,
        rounds=rounds or defaults.rounds,
        cold_start_tasks=cold_start_tasks or defaults.cold_start_tasks,
        test_tasks=test_tasks,
        database_url=os.environ.get("DATABASE_URL"),
    )
    # a log file or a pipe gets a wide console: the closing tables must not wrap their numbers
    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=140)
    if policy == "procedural":
        console.print(
            "[bold]policy: procedural, a TEST DOUBLE[/] that follows the skill chunks it recognises"
        )
    signal.signal(signal.SIGTERM, _interrupt)  # a `kill` stops the children like Ctrl-C does
    started = datetime.now(UTC)
    try:
        with DemoDisplay(total_steps(options), console) as display:
            summary = run_demo(options, display)
    except KeyboardInterrupt:
        console.print(
            f"\n[yellow]interrupted[/]: every process the demo started is stopped. Run the same "
            f"command again to resume from {options.out}."
        )
        raise typer.Exit(130) from None
    except DemoError as error:
        console.print(f"[red]demo stopped[/]: {error}")
        raise typer.Exit(1) from None
    minutes = (datetime.now(UTC) - started).total_seconds() / 60
    print_summary(summary, console, minutes)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def print_summary(summary: dict[str, Any], console: Console, minutes: float) -> None:
    rounds = Table(title="rounds: the bank trained under, the slow loop, the gate")
    for column in ("round", "bank", "size", "all-wrong", "cards", "eligible", "candidates",
                   "admitted", "gate", "next bank"):  # fmt: skip
        rounds.add_column(column)
    for r in summary["rounds"]:
        rounds.add_row(
            *map(
                str,
                (r["round"], r["bank_id"], r["bank_size"], r["all_wrong_groups"], r["cards"],
                 r["eligible"], r["candidates"], r["admitted"], r["gate_status"],
                 r["next_bank_id"]),
            )
        )  # fmt: skip
    console.print(rounds)
    test = Table(title="test set (success, Wilson 95% interval)")
    for column in ("condition", "success", "interval", "strict reward"):
        test.add_column(column)
    for name, row in summary["test"].items():
        low, high = row["success_ci"]
        strict = row.get("r_strict")
        same = row.get("identical_to")
        test.add_row(
            f"{name} (= {same}, evaluated once)" if same else name,
            f"{row['success']:.1%}",
            f"[{low:.1%}, {high:.1%}]",
            "-" if strict is None else f"{strict:.3f}",
        )
    console.print(test)
    console.print(summary["test_note"])
    for name, diff in summary.get("test_differences", {}).items():
        console.print(
            f"  {name}: {100 * diff['estimate']:+.1f} pp "
            f"[{100 * diff['low']:+.1f}, {100 * diff['high']:+.1f}] (paired bootstrap)"
        )
    console.print(f"final bank {summary['final_bank_id']}; took {minutes:.1f} minutes")
    phases = ", ".join(f"{k} {v / 60:.1f}" for k, v in (summary.get("seconds") or {}).items())
    if phases:
        console.print(f"minutes per phase: {phases}")
    console.print(f"report: {summary['report']}  (and summary.json, report.md beside it)")
    run_dir = Path(summary["report"]).parent
    console.print(f"console: intraskill console serve --run {run_dir}  -> http://127.0.0.1:8300")


def main(argv: list[str]) -> int:
    """Entry point for `intraskill demo`."""
    code = run_app(app, argv, "intraskill demo")
    sys.stdout.flush()
    return code
