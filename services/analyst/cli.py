"""`intraskill analyst ...`: the gold firewall, the slow loop's service and its local runs.

    intraskill analyst firewall cases.json --json     # one JSON line per case
    intraskill analyst serve --port 8200              # the analyst service (ANALYST_* settings)

Settings come from ANALYST_* variables (`services/analyst/settings.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="analyst",
    help="Slow loop: gold firewall, failure analysis, compiler, cold start, service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Slow loop: gold firewall, failure analysis, compiler, cold start, service."""


@app.command()
def firewall(
    file: Annotated[Path, typer.Argument(help='JSON list of {"name","text","gold"} cases')],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Run the gold firewall on each case: admitted or not, and the findings."""
    from shared.leak import GoldFacts, find_leaks

    try:
        cases = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(cases, list):
            raise ValueError("expected a JSON list of cases")
    except (OSError, ValueError) as error:
        print(f"intraskill analyst firewall: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    for case in cases:
        findings = find_leaks(case["text"], gold=GoldFacts.from_json(case.get("gold") or {}))
        line = {
            "name": case.get("name", ""),
            "admitted": not findings,
            "findings": [{"rule": f.rule, "text": f.text} for f in findings],
        }
        if as_json:
            print(json.dumps(line, ensure_ascii=False))
        else:
            verdict = "admitted" if line["admitted"] else "BLOCKED "
            rules = ", ".join(f"{f['rule']}:{f['text']}" for f in line["findings"])
            print(f"{verdict} {line['name']}  {rules}")


@app.command()
def serve(host: str = "127.0.0.1", port: int = 8200) -> None:
    """Serve the analyst (groups, compile and cold-start jobs); settings from ANALYST_*."""
    import uvicorn

    from services.analyst.settings import AnalystSettings

    settings = AnalystSettings()  # validated now: a bad setting stops the start, not a job
    typer.echo(f"analyst on http://{host}:{port}/docs  registry {settings.registry_url}")
    uvicorn.run("services.analyst.app:create_app", factory=True, host=host, port=port)


def main(argv: list[str]) -> int:
    """Entry point for `intraskill analyst`: typer reports usage errors and sets the exit code."""
    try:
        app(args=argv, prog_name="intraskill analyst")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
