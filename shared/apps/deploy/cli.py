"""`intraskill deploy smoke --overlay dev`: the rendered manifests, run as local processes."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="deployment checks without a cluster", no_args_is_help=True,
                  add_completion=False)  # fmt: skip


@app.callback()
def _group() -> None:
    """Deployment checks without a cluster."""


@app.command()
def smoke(
    overlay: Annotated[
        str, typer.Option(help="deploy/k8s/overlays/<overlay>, or an overlay folder's path")
    ] = "dev",
    work: Annotated[
        Path | None, typer.Option(help="keep folders and logs here (default: a temp folder)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds the trainer Job may take")] = 3600.0,
    image_venvs: Annotated[
        bool,
        typer.Option(
            "--image-venvs/--this-python",
            help="each container on its image's venv, as its pod's user (default); or all on "
            "this Python's environment as the invoking user, which hides a dependency missing "
            "from an image (a quicker check, never the proof)",
        ),
    ] = True,
) -> None:
    """Start every IntraSkill container of the rendered overlay as a process (see
    shared/apps/deploy/smoke/ for what differs from a pod); one round with a gate must finish."""
    from shared.apps.deploy.smoke import Smoke, SmokeFailure, work_folder

    # SIGTERM unwinds like Ctrl-C: the processes stop and the scratch database is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with work_folder(work) as folder:
        try:
            line = Smoke(overlay, folder, timeout_s=timeout, image_venvs=image_venvs).run()
        except SmokeFailure as failure:
            typer.echo(f"deploy smoke {overlay}: FAILED in {failure}", err=True)
            raise typer.Exit(1) from None
    typer.echo(line)


def main(argv: list[str]) -> int | None:
    try:  # without standalone mode, click returns an Exit's code instead of raising it
        code = app(args=argv, prog_name="intraskill deploy", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    return code if isinstance(code, int) else 0
