"""`intraskill console serve`: the operator console (CONSOLE_* settings).

intraskill console serve --port 8300      # then open http://127.0.0.1:8300 and log in
                                          # with a registry token
"""

from __future__ import annotations

import typer

from shared.service_cli import command_group, run_command

app = command_group("console", "Operator console: banks, chunks, gates, review, audit.")


@app.command()
def serve(host: str = "127.0.0.1", port: int = 8300) -> None:
    """Serve the console; it talks to CONSOLE_REGISTRY_URL with each user's own token."""
    import uvicorn

    from services.console.settings import ConsoleSettings

    settings = ConsoleSettings()  # validated now: a bad setting stops the start
    typer.echo(f"console on http://{host}:{port}  registry {settings.registry_url}")
    uvicorn.run("services.console.app:create_app", factory=True, host=host, port=port)


def main(argv: list[str]) -> int:
    """Entry point for `intraskill console`."""
    return run_command(app, argv, "intraskill console")
