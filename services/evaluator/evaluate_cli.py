"""`intraskill evaluate ...`: test-set evaluation of the four conditions, and its report.

    intraskill evaluate run --base ckpt-base --trained ckpt-iter80 --s0-bank 1 --final-alias current
    intraskill evaluate report runs/evaluator/eval-local      # recompute from stored records

`run` uses the registry (EVALUATOR_REGISTRY_URL / _TOKEN) for checkpoints and banks and the
agent runtime (EVALUATOR_BACKEND, ...) for rollouts; it writes plan.json, records.jsonl,
evaluation.json and evaluation.png to --out. Like the demo's test, it also evaluates base/bare a
second time under other sampling seeds (`--aa-of` picks another condition, `--no-aa` none): the
A/A row, the noise floor the other differences are read against.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from services.evaluator.eval_conditions import PAPER_CONDITIONS
from services.evaluator.eval_folder import report_from_folder
from services.evaluator.eval_plot import plot_report
from services.evaluator.eval_report import METRIC_NAMES
from shared.kit.service_cli import command_group, run_command
from shared.runtime.noise_floor import aa_condition, comparison_label

app = command_group(
    "evaluate",
    "Test-set evaluation: base/bare, base/S0, trained/bare, trained/S_T, and an A/A copy.",
)
SHOWN = ("r_strict", "r_success", "r_loose", "steps", "protocol_error_rate", "tokens_per_turn")


def _console() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=200)


def print_report(report: dict[str, Any]) -> None:
    console = _console()
    table = Table(title=f"conditions ({report['n_tasks']} paired tasks)")
    table.add_column("condition")
    for metric in SHOWN:
        table.add_column(metric, justify="right")
    for name, condition in report["conditions"].items():
        table.add_row(name, *[f"{condition['metrics'].get(m, float('nan')):.4f}" for m in SHOWN])
    console.print(table)
    boot = report["bootstrap"]
    table = Table(
        title=f"paired differences a - b, {boot['level']:.0%} percentile bootstrap "
        f"({boot['resamples']:,} resamples, seed {boot['seed']})"
    )
    table.add_column("a - b")
    for metric in ("r_strict", "r_success", "steps", "protocol_error_rate"):
        table.add_column(metric, justify="right")
    table.add_column("flips f->s / s->f", justify="right")
    for comparison in report["comparisons"]:
        cells = []
        for metric in ("r_strict", "r_success", "steps", "protocol_error_rate"):
            d = comparison["differences"][metric]
            cells.append(f"{d['estimate']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]")
        flips = comparison["flips"]
        table.add_row(
            comparison_label(comparison),
            *cells,
            f"{flips['fail_to_success']} / {flips['success_to_fail']}",
        )
    console.print(table)
    if report["dropped"]:
        console.print(f"[yellow]{len(report['dropped'])} task(s) dropped (no completed rollout)")


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(help="an evaluation folder: plan.json + records.jsonl")],
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    resamples: Annotated[int | None, typer.Option(min=100)] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    plot: Annotated[Path | None, typer.Option(help="also write the plot here")] = None,
) -> None:
    """Recompute an evaluation's report (metrics and bootstrap intervals) from its records."""
    try:
        result = report_from_folder(folder, resamples=resamples, seed=seed)
    except (OSError, ValueError, KeyError) as error:
        print(f"intraskill evaluate report: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    if plot is not None:
        plot_report(result, plot)
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        print_report(result)


def evaluation_conditions(
    *, base: str, trained: str, s0_bank: int, final: dict[str, Any], aa_of: str | None
) -> list[dict[str, Any]]:
    """The eval job's conditions: the four, then the A/A copy of `aa_of` (None: no copy)."""
    conditions = [
        {"name": "base/bare", "checkpoint_id": base},
        {"name": "base/S0", "checkpoint_id": base, "bank_id": s0_bank},
        {"name": "trained/bare", "checkpoint_id": trained},
        {"name": "trained/S_T", "checkpoint_id": trained, **final},
    ]
    if aa_of is None:
        return conditions
    by_name = {condition["name"]: condition for condition in conditions}
    if aa_of not in by_name:
        raise ValueError(f"the A/A row repeats one of {', '.join(by_name)}, not {aa_of!r}")
    return [*conditions, aa_condition(by_name[aa_of])]


@app.command()
def run(
    base: Annotated[str, typer.Option(help="checkpoint id of the base model")],
    trained: Annotated[str, typer.Option(help="checkpoint id of the trained model")],
    s0_bank: Annotated[int, typer.Option(help="bank id of S0 (the cold-start bank)")],
    final_bank: Annotated[int | None, typer.Option(help="bank id of S_T")] = None,
    final_alias: Annotated[str | None, typer.Option(help="or the alias of S_T")] = "current",
    split: str = "test",
    n_tasks: Annotated[int | None, typer.Option(min=1)] = None,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("runs/evaluator/eval-local"),
    resamples: Annotated[int | None, typer.Option(min=100)] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    aa: Annotated[
        bool,
        typer.Option(
            help="add the A/A row: one condition evaluated again under other sampling seeds"
        ),
    ] = True,
    aa_of: Annotated[
        str, typer.Option(help=f"the condition the A/A row repeats: {', '.join(PAPER_CONDITIONS)}")
    ] = "base/bare",
) -> None:
    """Run the four conditions and the A/A copy on the test split in this process, then report."""
    from services.evaluator.eval_job import eval_job, plan_eval_job
    from services.evaluator.runtime import agent_runner_factory, make_env
    from services.evaluator.settings import EvaluatorSettings
    from services.evaluator.task_selection import TaskSelectionError, select_tasks_from
    from shared.contracts.evaluator_api.schemas import EvalJobCreate
    from shared.kit.service_jobs import LocalContext

    final = {"bank_id": final_bank} if final_bank is not None else {"bank_alias": final_alias}
    try:
        conditions = evaluation_conditions(
            base=base, trained=trained, s0_bank=s0_bank, final=final, aa_of=aa_of if aa else None
        )
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--aa-of") from None
    settings = EvaluatorSettings()
    body = EvalJobCreate(
        conditions=conditions,
        split=split,
        n_tasks=n_tasks,
        resamples=resamples,
        seed=seed,
    )
    try:
        tasks = select_tasks_from(make_env(settings).task_ids(split), None, n_tasks, split=split)
    except TaskSelectionError as error:
        raise typer.BadParameter(f"{error} in split {split!r}", param_hint="--n-tasks") from None
    client = settings.registry_client()
    try:
        planned = plan_eval_job(body, client, settings, tasks)
    finally:
        client.close()
    out.mkdir(parents=True, exist_ok=True)
    work = eval_job(
        planned,
        runner_factory=agent_runner_factory(settings),
        client_factory=settings.registry_client,
    )
    result = work(LocalContext(out))
    print_report(result)
    _console().print(f"wrote {out}/evaluation.json, evaluation.png, records.jsonl")


def main(argv: list[str]) -> int:
    """Entry point for `intraskill evaluate`."""
    return run_command(app, argv, "intraskill evaluate")


__all__ = ["METRIC_NAMES", "app", "main"]
