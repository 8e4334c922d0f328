"""`intraskill report RUN_DIR`: write RUN_DIR/report.md and RUN_DIR/report.html (+ report/*.png)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shared.apps.operator.common import OperatorError, RegistryOption, registry, run_app

app = typer.Typer(add_completion=False)


@app.command()
def report(
    run_dir: Annotated[
        Path, typer.Argument(help="a run folder (intraskill demo --out, train --out)")
    ],
    registry_url: RegistryOption = None,
    refresh: Annotated[
        bool, typer.Option(help="refresh registry.json from the registry (needs a token)")
    ] = False,
) -> None:
    """A run's report: training curves, funnel, bank lineage, gate coefficients, test table."""
    from shared.apps.report.build import build
    from shared.apps.report.data import load_run
    from shared.apps.report.document import to_html, to_markdown
    from shared.apps.report.snapshot import save_snapshot

    if not run_dir.is_dir():
        raise OperatorError(
            f"no run folder {run_dir}: pass the folder `intraskill demo --out` wrote"
        )
    if refresh or registry_url:
        with registry(registry_url, subject="the registry snapshot") as client:
            save_snapshot(client, run_dir)
    document = build(load_run(run_dir))
    (run_dir / "report.md").write_text(to_markdown(document, run_dir))
    (run_dir / "report.html").write_text(to_html(document))
    print(f"wrote {run_dir / 'report.html'} (self-contained) and {run_dir / 'report.md'}")


def main(argv: list[str]) -> int:
    """Entry point for `intraskill report`."""
    code = run_app(app, argv, "intraskill report")
    sys.stdout.flush()
    return code
