"""`intraskill analyst ...`: the gold firewall, the slow loop's service and its local runs.

    intraskill analyst firewall cases.json --json     # one JSON line per case
    intraskill analyst serve --port 8200              # the analyst service (ANALYST_* settings)

Settings come from ANALYST_* variables (`services/analyst/settings.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shared.kit.service_cli import command_group, run_command, serve_app

if TYPE_CHECKING:
    from shared.runtime.leak import GoldFacts

app = command_group(
    "analyst", "Slow loop: gold firewall, failure analysis, compiler, cold start, service."
)


@app.command()
def firewall(
    file: Annotated[
        Path,
        typer.Argument(
            help='JSON list of {"name","text","gold"} cases; gold.price a number, gold.catalog'
            ' an optional list of {"product_id","title","category"}'
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Run the gold firewall on each case: admitted or not, and the findings with the
    canonical form that matched (the analyst's own `find_leaks`)."""
    from shared.runtime.leak import canonical_form, find_leaks, reason

    try:
        cases = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(cases, list):
            raise ValueError("expected a JSON list of cases")
        # every case's gold is read before any verdict: a bad price stops the run, not a case
        golds = [_case_gold(index, case) for index, case in enumerate(cases)]
    except (OSError, ValueError) as error:
        print(f"intraskill analyst firewall: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    for case, gold in zip(cases, golds, strict=True):
        findings = find_leaks(case["text"], gold=gold)
        line = {
            "name": case.get("name", ""),
            "admitted": not findings,
            "findings": [
                {"rule": f.rule, "text": f.text, "canonical": canonical_form(f)} for f in findings
            ],
        }
        if as_json:
            print(json.dumps(line, ensure_ascii=False))
        else:
            verdict = "admitted" if line["admitted"] else "BLOCKED "
            print(f"{verdict} {line['name']}  {'; '.join(reason(f) for f in findings)}")


def _case_gold(index: int, case: object) -> GoldFacts:
    """A case's gold facts; a case without text, or with a malformed gold, names itself."""
    from shared.runtime.leak import GoldFacts

    name = case.get("name", index) if isinstance(case, dict) else index
    if not isinstance(case, dict) or not isinstance(case.get("text"), str):
        raise ValueError(f"case {name!r}: expected an object with a string 'text'")
    try:
        return GoldFacts.from_json(case.get("gold") or {})
    except ValueError as error:
        raise ValueError(f"case {name!r}: {error}") from None


@app.command()
def serve(host: str = "127.0.0.1", port: int = 8200) -> None:
    """Serve the analyst (groups, compile and cold-start jobs); settings from ANALYST_*."""
    from services.analyst.settings import AnalystSettings

    settings = AnalystSettings()  # validated now: a bad setting stops the start, not a job
    serve_app(
        "analyst", "services.analyst.app:create_app",
        registry_url=settings.registry_url, host=host, port=port, json_logs=settings.json_logs,
    )  # fmt: skip


def main(argv: list[str]) -> int:
    """Entry point for `intraskill analyst`."""
    return run_command(app, argv, "intraskill analyst")
