"""`intraskill gate ...`: refit a stored or exported gate, run a gate, serve the gate service."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.evaluator.decision import GateDecision, decide
from services.evaluator.design import DesignError
from services.evaluator.fit import SOLVERS, FitError
from services.evaluator.gate_folder import GateFolderError, read_gate_folder

app = typer.Typer(
    name="gate",
    help="Paired randomized validation gates: refit, run, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Paired randomized validation gates: refit, run, serve."""


@app.command()
def refit(
    source: Annotated[
        str, typer.Argument(help="a folder with slots.json + observations.jsonl, or a gate run id")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    intervals: Annotated[
        bool, typer.Option(help="add HC3 errors and 95% intervals to the JSON")
    ] = False,
    solver: Annotated[
        str,
        typer.Option(help="statsmodels, or reference (bit-identical to the reference run)"),
    ] = "statsmodels",
    budget: Annotated[int | None, typer.Option(help="override the budget K")] = None,
) -> None:
    """Re-fit and re-select a gate from its raw per-task observations."""
    if solver not in SOLVERS:
        raise typer.BadParameter(f"choose one of {', '.join(SOLVERS)}", param_hint="--solver")
    path = Path(source)
    try:
        if path.is_dir():
            data = read_gate_folder(path)
            design, observations = data.design, data.observations
        else:
            try:
                from services.evaluator.records import load_gate_run
            except ImportError as error:  # the registry client is not installed here
                raise LookupError(
                    f"{source} is not a folder, and gate run ids need the registry client ({error})"
                ) from None
            design, observations, stored_solver = load_gate_run(source)
            solver = stored_solver if solver == "statsmodels" else solver
        decision = decide(design, observations, budget=budget, solver=solver)  # type: ignore[arg-type]
    except (GateFolderError, DesignError, FitError, LookupError) as error:
        print(f"intraskill gate refit: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(decision.as_json(intervals=intervals), indent=1, ensure_ascii=False))
    else:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze ids into 80 columns
            console = Console(width=200)
        console.print(decision_table(decision, title=f"gate {source}"))


def decision_table(decision: GateDecision, *, title: str = "gate decision") -> Table:
    """One row per chunk version: coefficient with its HC3 interval, rank, status and next rho."""
    primary = decision.fit.primary
    se = dict(zip(primary.ids, primary.hc3_se, strict=True))
    low = dict(zip(primary.ids, primary.ci_low, strict=True))
    high = dict(zip(primary.ids, primary.ci_high, strict=True))
    table = Table(
        title=title,
        caption=(
            f"{primary.n} paired tasks; strict reward masked {primary.masked_mean:.4f}, "
            f"bare {primary.bare_mean:.4f}; K={decision.design.budget}, "
            f"mask seed {decision.design.mask_seed}; {len(decision.selection.bank)} selected"
        ),
    )
    for name, justify in [
        ("slot", "right"),
        ("intervention", "left"),
        ("kind", "left"),
        ("logical id", "left"),
        ("beta (strict)", "right"),
        ("HC3 SE", "right"),
        ("95% CI", "right"),
        ("rank", "right"),
        ("status", "left"),
        ("next rho", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    styles = {"selected": "green", "rewrite_loser": "dim", "retired": "red"}
    for row in decision.selection.decisions:
        vid = row.intervention_id
        rho = decision.next_rho.get(vid)
        table.add_row(
            str(row.order),
            vid,
            row.kind,
            row.logical_id if row.logical_id != vid else "",
            f"{row.coefficient:+.4f}",
            f"{se[vid]:.4f}",
            f"[{low[vid]:+.3f}, {high[vid]:+.3f}]",
            "" if row.rank is None else str(row.rank),
            row.status,
            "" if rho is None else f"{rho:.3f}",
            style=styles.get(row.status),
        )
    return table


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8100,
) -> None:
    """Serve the evaluator (gate and evaluation jobs); settings from EVALUATOR_* variables."""
    import uvicorn

    from services.evaluator.settings import EvaluatorSettings

    settings = EvaluatorSettings()  # validated now: a bad setting stops the start, not a job
    typer.echo(f"evaluator on http://{host}:{port}/docs  registry {settings.registry_url}")
    uvicorn.run("services.evaluator.app:create_app", factory=True, host=host, port=port)


def main(argv: list[str]) -> int:
    """Entry point for `intraskill gate`: typer reports usage errors and sets the exit code."""
    try:
        app(args=argv, prog_name="intraskill gate")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
