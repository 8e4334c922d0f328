"""`intraskill gate ...`: refit a stored or exported gate, run Gate A, serve the gate service.

    intraskill gate refit 17 --json                                 # a stored gate run
    intraskill gate cold-start --checkpoint ckpt-base --draft 3 --draft 4 ...  # Gate A -> S_0
    intraskill gate serve --port 8100                               # gate and Gate A jobs

Settings come from EVALUATOR_* variables (`services/evaluator/settings.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.evaluator.decision import (
    ADMIT_RULES,
    EMPTY_BANK_POLICIES,
    GateDecision,
    decide,
    json_safe,
)
from services.evaluator.design import K_INIT, DesignError
from services.evaluator.fit import SOLVERS, FitError
from services.evaluator.gate_folder import GateFolderError, read_gate_folder
from shared.kit.service_cli import command_group, run_command, serve_app

app = command_group(
    "gate", "Paired randomized validation gates: refit, cold-start (Gate A), serve."
)


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
        str | None,
        typer.Option(
            help="statsmodels, or reference (bit-identical to the reference run); default: the "
            "stored gate's solver, statsmodels for a folder"
        ),
    ] = None,
    budget: Annotated[
        int | None, typer.Option(help="override the budget K (default: the gate's own)")
    ] = None,
    admit: Annotated[
        str,
        typer.Option(
            help="coefficient: admit chunks with beta > 0 (the method); lower_bound: only those "
            "whose one-sided 95% HC3 lower bound is > 0 as well"
        ),
    ] = "coefficient",
) -> None:
    """Re-fit and re-select a gate from its raw per-task observations."""
    from shared.contracts.registry_api.client import RegistryError

    if solver is not None and solver not in SOLVERS:
        raise typer.BadParameter(f"choose one of {', '.join(SOLVERS)}", param_hint="--solver")
    if admit not in ADMIT_RULES:
        raise typer.BadParameter(f"choose one of {', '.join(ADMIT_RULES)}", param_hint="--admit")
    path = Path(source)
    try:
        if not source.isdigit() and not path.is_dir():
            # gate run ids are integers: anything else names a folder, which must exist
            what = "is not a folder" if path.exists() else "does not exist"
            raise GateFolderError(f"folder {source} {what} (a gate run id is an integer)")
        if path.is_dir():
            data = read_gate_folder(path)
            design, observations, gate_solver = data.design, data.observations, "statsmodels"
        else:
            try:
                from services.evaluator.stored_gate import load_gate_run
            except ImportError as error:  # the registry client is not installed here
                raise LookupError(
                    f"{source} is not a folder, and gate run ids need the registry client ({error})"
                ) from None
            design, observations, gate_solver = load_gate_run(source)
        chosen = solver or gate_solver
        decision = decide(design, observations, budget=budget, solver=chosen, admit=admit)  # type: ignore[arg-type]
    except (GateFolderError, DesignError, FitError, LookupError, RegistryError) as error:
        print(f"intraskill gate refit: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    if as_json:
        print(
            json.dumps(decision.as_json(intervals=intervals), indent=1, ensure_ascii=False),
        )
    else:
        _console().print(decision_table(decision, title=f"gate {source}"))


def _console() -> Console:
    console = Console()
    # piped or captured: do not squeeze ids into 80 columns
    return console if console.is_terminal else Console(width=200)


def decision_table(decision: GateDecision, *, title: str = "gate decision") -> Table:
    """One row per chunk version: coefficient with its HC3 interval, rank, status and next rho."""
    primary = decision.fit.primary
    se = dict(zip(primary.ids, primary.hc3_se, strict=True))
    low = dict(zip(primary.ids, primary.ci_low, strict=True))
    high = dict(zip(primary.ids, primary.ci_high, strict=True))
    bound = primary.lower_bound_map()
    table = Table(
        title=title,
        caption=(
            f"{primary.n} paired tasks; strict reward masked {primary.masked_mean:.4f}, "
            f"bare {primary.bare_mean:.4f}; K={decision.design.budget}, "
            f"mask seed {decision.design.mask_seed}; admit by {decision.admit}; "
            f"{len(decision.selection.bank)} selected"
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
        ("95% lower bound", "right"),
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
            f"{bound[vid]:+.3f}",
            "" if row.rank is None else str(row.rank),
            row.status,
            "" if rho is None else f"{rho:.3f}",
            style=styles.get(row.status),
        )
    return table


@app.command("cold-start")
def cold_start(
    checkpoint: Annotated[str, typer.Option(help="checkpoint id of the base model (registry)")],
    draft: Annotated[
        list[int],
        typer.Option(help="a cold-start chunk version id; repeat in draft order (S_0's order)"),
    ],
    alias: Annotated[str, typer.Option(help="the alias S_0 becomes (created if absent)")] = (
        "current"
    ),
    n_tasks: Annotated[int | None, typer.Option(min=1, help="first n validation tasks")] = None,
    budget: Annotated[int, typer.Option(min=1, max=64, help="K_init")] = K_INIT,
    mask_seed: Annotated[int | None, typer.Option(min=0)] = None,
    max_retries: Annotated[int | None, typer.Option(min=0, max=10)] = None,
    solver: Annotated[str, typer.Option(help="statsmodels or reference")] = "statsmodels",
    move_alias: Annotated[bool, typer.Option(help="adopt S_0 when the gate is complete")] = True,
    empty_bank: Annotated[
        str | None,
        typer.Option(
            help="when no draft has a positive coefficient: keep (no S_0, alias untouched) or "
            "adopt (an empty S_0); default: EVALUATOR_EMPTY_BANK (keep)"
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="job folder: records.jsonl, gate.json")] = Path(
        "runs/evaluator/gate-a-local"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Gate A in this process: bare + masked rollouts over the drafts, fit, S_0, `current`."""
    from services.evaluator.gate_job import gate_job, plan_gate_a_job
    from services.evaluator.runtime import agent_runner_factory, make_env
    from services.evaluator.settings import EvaluatorSettings
    from services.evaluator.task_selection import TaskSelectionError, select_tasks_from
    from shared.contracts.evaluator_api.schemas import GateAJobCreate
    from shared.contracts.registry_api.client import RegistryError
    from shared.kit.service_jobs import LocalContext

    if solver not in SOLVERS:
        raise typer.BadParameter(f"choose one of {', '.join(SOLVERS)}", param_hint="--solver")
    if empty_bank is not None and empty_bank not in EMPTY_BANK_POLICIES:
        raise typer.BadParameter(
            f"choose one of {', '.join(EMPTY_BANK_POLICIES)}", param_hint="--empty-bank"
        )
    settings = EvaluatorSettings()
    try:
        body = GateAJobCreate(
            checkpoint_id=checkpoint,
            draft_version_ids=draft,
            alias=alias,
            n_tasks=n_tasks,
            budget=budget,
            mask_seed=mask_seed,
            max_retries=max_retries,
            solver=solver,  # type: ignore[arg-type]
            move_alias=move_alias,
            empty_bank=empty_bank,  # type: ignore[arg-type]
        )
        tasks = select_tasks_from(
            make_env(settings).task_ids(settings.split), None, n_tasks, split=settings.split
        )
        client = settings.registry_client()
        try:
            planned = plan_gate_a_job(body, client, settings, tasks)
        finally:
            client.close()
    except (ValueError, LookupError, RegistryError, TaskSelectionError) as error:
        print(f"intraskill gate cold-start: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    work = gate_job(
        planned,
        client_factory=settings.registry_client,
        runner_factory=agent_runner_factory(settings),
        jobs_root=out.parent,
        empty_bank=settings.empty_bank,
    )
    result = work(LocalContext(out))
    if as_json:
        print(json.dumps(json_safe(result), indent=1, ensure_ascii=False))
    else:
        recorded = result["registry"]
        console = _console()
        console.print(
            f"Gate A {result['status']}: {result.get('paired', 0)} paired tasks, gate run "
            f"{recorded['gate_run_id']}, decision {recorded['decision_id']}"
            f"{' (provisional)' if recorded['provisional'] else ''}, S_0 bank "
            f"{recorded['bank_id']}, {alias} moved: {recorded['alias_moved']}"
            f"{'' if not recorded['alias_note'] else ' (' + recorded['alias_note'] + ')'}"
        )
        if recorded.get("empty_selection"):
            console.print("[bold red]S_0 is empty: no draft has a positive coefficient.[/]")
        decision = result.get("decision")
        if decision is not None:
            for vid, status in decision["status"].items():
                rho = decision["next_rho"].get(vid)
                console.print(
                    f"  {vid:<40} beta {decision['coefficients'][vid]:+.4f}  {status:<15}"
                    f"{'' if rho is None else f' rho {rho:.3f}'}"
                )
    if result["status"] != "complete":
        raise typer.Exit(1)


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8100,
) -> None:
    """Serve the evaluator (gate and evaluation jobs); settings from EVALUATOR_* variables."""
    from services.evaluator.settings import EvaluatorSettings

    settings = EvaluatorSettings()  # validated now: a bad setting stops the start, not a job
    serve_app(
        "evaluator", "services.evaluator.app:create_app",
        registry_url=settings.registry_url, host=host, port=port, json_logs=settings.json_logs,
    )  # fmt: skip


def main(argv: list[str]) -> int:
    """Entry point for `intraskill gate`."""
    return run_command(app, argv, "intraskill gate")
