"""`intraskill console serve`: the operator console (CONSOLE_* settings).

    intraskill console serve                               # log in with a registry token
    intraskill console serve --run runs/demo-procedural    # a demo run's registry beside it

With `--run`, the run's registry (its SQLite file and its tokens) is served on a free loopback
port for as long as the console runs, and an operator token for it is printed.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from shared.kit.service_cli import command_group, metrics_beside_api, run_command

app = command_group("console", "Operator console: banks, chunks, gates, review, audit.")


@contextmanager
def run_registry(run_dir: Path):
    """The demo run's registry (its SQLite file and its tokens) on a free loopback port."""
    from shared.kit.loopback import run_tokens, start_registry

    database = run_dir / "registry.sqlite"
    if not database.exists():
        raise typer.BadParameter(f"{database} does not exist", param_hint="--run")
    tokens, grants = run_tokens(run_dir)
    registry = start_registry(
        database_url=f"sqlite:///{database.resolve()}",
        grants=grants,
        log=run_dir / "logs" / "console-registry.log",
    )
    try:
        registry.wait_ready()
        yield registry.url, tokens["operator"]
    finally:
        registry.stop()


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8300,
    run: Annotated[
        Path | None, typer.Option(help="a demo run folder: serve its registry beside the console")
    ] = None,
) -> None:
    """Serve the console; it talks to CONSOLE_REGISTRY_URL with each user's own token."""
    import uvicorn

    from services.console.settings import ConsoleSettings

    def start() -> None:
        settings = ConsoleSettings()  # validated now: a bad setting stops the start
        metrics_beside_api("console", host)
        typer.echo(f"console on http://{host}:{port}  registry {settings.registry_url}")
        uvicorn.run("services.console.app:create_app", factory=True, host=host, port=port)

    if run is None:
        start()
        return
    with run_registry(run) as (registry_url, operator_token):
        os.environ["CONSOLE_REGISTRY_URL"] = registry_url
        os.environ.setdefault("CONSOLE_TRACES_DIR", str((run / "analyst").resolve()))
        typer.echo(f"operator token for this run: {operator_token}")
        start()


def main(argv: list[str]) -> int:
    """Entry point for `intraskill console`."""
    return run_command(app, argv, "intraskill console")
