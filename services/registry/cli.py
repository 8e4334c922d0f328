"""`intraskill registry ...`: serve the registry, migrate its database, mint tokens."""

from __future__ import annotations

import json
import logging
import os
import secrets
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from services.registry.settings import RegistrySettings
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import TokenGrant, hash_token
from shared.kit.service_cli import metrics_beside_api

app = typer.Typer(
    help="SkillBank registry: serve, migrate, token, seed-demo",
    no_args_is_help=True,
    add_completion=False,
)


def _mint(name: str, role: Role, expires_at: datetime | None = None) -> tuple[str, TokenGrant]:
    token = secrets.token_urlsafe(32)
    grant = TokenGrant(name=name, role=role, token_sha256=hash_token(token), expires_at=expires_at)
    return token, grant


@app.command()
def migrate(
    database_url: Annotated[
        str | None, typer.Option(help="default: DATABASE_URL or the SQLite file")
    ] = None,
    app_role: Annotated[
        str | None,
        typer.Option(help="Postgres: grant this existing role what the app needs, no ownership"),
    ] = None,
    wait_for_database: Annotated[
        float,
        typer.Option(
            min=0, help="seconds to wait for the database to accept a connection (0: fail at once)"
        ),
    ] = 0.0,
) -> None:
    """Bring the database schema to the latest revision (Alembic), as the schema's owner."""
    from services.registry.migrate import grant_app_role, upgrade, wait_until_database_answers

    settings = (
        RegistrySettings() if database_url is None else RegistrySettings(database_url=database_url)
    )
    if wait_for_database > 0:
        try:
            wait_until_database_answers(settings.database_url, wait_for_database)
        except RuntimeError as error:
            typer.echo(f"intraskill registry migrate: {error}", err=True)
            raise typer.Exit(1) from None
    upgrade(settings.database_url)
    typer.echo(f"migrated {settings.database_url.split('@')[-1]}")
    if app_role:
        grant_app_role(settings.database_url, app_role)
        typer.echo(f"granted {app_role} read/append rights (it owns nothing)")


@app.command()
def token(
    name: Annotated[str, typer.Option(help="who holds the token (recorded as actor)")],
    role: Annotated[Role, typer.Option(help="what it may do")],
    expires_in_days: Annotated[
        float | None, typer.Option(min=0, help="the token stops working after this many days")
    ] = None,
) -> None:
    """Mint a bearer token: prints the token once and the grant to add to REGISTRY_TOKENS."""
    expires_at = (
        None if expires_in_days is None else datetime.now(UTC) + timedelta(days=expires_in_days)
    )
    secret, grant = _mint(name, role, expires_at)
    typer.echo(f"token: {secret}")
    typer.echo(f"grant: {grant.model_dump_json(exclude_defaults=True)}")


def is_loopback(host: str) -> bool:
    """Whether `host` binds only this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes")] = 1,
    migrate_first: Annotated[bool, typer.Option("--migrate/--no-migrate")] = True,
    allow_owner: Annotated[
        bool,
        typer.Option(
            "--allow-owner",
            help="serve as a Postgres superuser or table owner (local runs only): such a role "
            "can disable the append-only triggers",
        ),
    ] = False,
) -> None:
    """Serve the registry (default: an embedded SQLite file, migrated on start)."""
    settings = RegistrySettings()
    if not settings.tokens and not is_loopback(host):
        # A deployment binds every interface: a minted token would be an operator token that
        # only the log knows, on a server anyone on the network reaches.
        typer.echo(
            f"refusing to serve on {host} without REGISTRY_TOKENS: set the grant list "
            "(`intraskill registry token` mints one); only a registry bound to loopback "
            "mints a demo operator token.",
            err=True,
        )
        raise typer.Exit(2)
    if settings.metrics_port is not None and workers > 1:
        typer.echo(
            f"refusing to serve {workers} workers with REGISTRY_METRICS_PORT: each worker "
            "would bind that port (and count only its own requests); run one worker per pod",
            err=True,
        )
        raise typer.Exit(2)
    metrics_beside_api("registry", host)

    import uvicorn

    from services.registry.migrate import upgrade
    from services.registry.roles import owner_rights
    from shared.kit.observability import uvicorn_logging

    if migrate_first:
        upgrade(settings.database_url)
    rights = owner_rights(settings.database_url)
    if rights and not allow_owner:
        typer.echo(
            f"refusing to serve: {rights}, so it could disable the registry's append-only "
            "triggers. Serve as the app role (`intraskill registry migrate --app-role ROLE` "
            "grants it), or pass --allow-owner for a local run.",
            err=True,
        )
        raise typer.Exit(2)
    if rights:
        logging.getLogger("intraskill.registry").warning(
            "serving with owner rights (--allow-owner): %s", rights
        )
    if not settings.tokens:
        # Demo mode: no tokens configured, so mint an operator token for this run only. The
        # workers read settings from the environment, hence the variable.
        secret, grant = _mint("local-operator", Role.operator)
        os.environ["REGISTRY_TOKENS"] = json.dumps([grant.model_dump(mode="json")])
        typer.echo(f"no REGISTRY_TOKENS configured; operator token for this run: {secret}")
    typer.echo(
        f"registry on http://{host}:{port}/docs  database {settings.database_url.split('@')[-1]}"
    )
    uvicorn.run(
        "services.registry.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http="httptools",
        loop="uvloop",
        log_level="warning",
        access_log=False,
        **uvicorn_logging(settings.json_logs),
    )


@app.command("seed-demo")
def seed_demo(
    registry: Annotated[
        str, typer.Option(envvar="REGISTRY_URL", help="the registry's base URL")
    ] = "http://127.0.0.1:8000",
    token: Annotated[
        str | None,
        typer.Option(envvar="REGISTRY_TOKEN", help="an operator token (env REGISTRY_TOKEN)"),
    ] = None,
) -> None:
    """Fill a fresh registry with the small history docs/registry.md's recipes use."""
    from services.registry.seed_demo import NotFresh, seed
    from shared.contracts.registry_api.client import RegistryClient

    if not token:
        typer.echo("set REGISTRY_TOKEN to an operator token (serve prints one in demo mode)")
        raise typer.Exit(2)
    with RegistryClient(registry, token) as client:
        try:
            seeded = seed(client)
        except NotFresh as error:
            typer.echo(f"{error}; start a new one (e.g. another SQLite file) and seed that")
            raise typer.Exit(1) from None
    typer.echo(f"chunks {seeded.chunk_ids}")
    typer.echo(f"banks {seeded.bank_ids} (production and current -> {seeded.bank_ids[1]})")
    typer.echo(f"gates {seeded.gate_ids} (Gate A, online, incomplete with a provisional fit)")


def main(argv: list[str]) -> int | None:
    """Entry point for `intraskill registry`."""
    try:
        # Without standalone mode, click returns an Exit's code instead of raising it.
        code = app(args=argv, prog_name="intraskill registry", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except Exception as error:  # click usage errors carry their own exit code
        code = getattr(error, "exit_code", None)
        if code is None:
            raise
        show = getattr(error, "show", None)
        if show:
            show()
        return code
    return code if isinstance(code, int) else 0
