"""What every service's `intraskill X ...` command shares: the typer group, the entry point
that turns typer's exit into a return code, and `serve` (uvicorn on an app factory)."""

from __future__ import annotations

import os

import typer


def command_group(name: str, help: str) -> typer.Typer:
    """A typer app of subcommands: no arguments shows the help, errors stay plain."""
    app = typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    # A callback keeps the app a group even while it has a single command.
    app.callback()(lambda: None)
    return app


def run_command(app: typer.Typer, argv: list[str], prog_name: str) -> int:
    """Run `app` on `argv`: typer reports usage errors and sets the exit code, returned here."""
    try:
        app(args=argv, prog_name=prog_name)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


def metrics_beside_api(service: str, host: str) -> None:
    """A metrics port of its own listens where the API does unless told otherwise
    (<SERVICE>_METRICS_HOST); the app reads it from the environment, since uvicorn builds the
    app from its factory."""
    os.environ.setdefault(f"{service.upper()}_METRICS_HOST", host)


def serve_app(
    service: str, factory: str, *, registry_url: str, host: str, port: int, json_logs: bool
) -> None:
    """Serve `factory` ("package.module:create_app") with uvicorn; settings were validated by
    the caller, so a bad setting stops the start rather than the first job."""
    import uvicorn

    from shared.kit.observability import uvicorn_logging

    typer.echo(f"{service} on http://{host}:{port}/docs  registry {registry_url}")
    metrics_beside_api(service, host)
    uvicorn.run(factory, factory=True, host=host, port=port, **uvicorn_logging(json_logs))
