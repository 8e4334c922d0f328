"""What every operator command shares: the connection, error sentences, JSON and table output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from shared.apps.operator.settings import OperatorSettings
from shared.contracts.registry_api.client import (
    AuthError,
    Conflict,
    Invalid,
    NotFound,
    PreconditionFailed,
    RegistryClient,
    RegistryError,
    Unavailable,
)

RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        help="registry base URL (default: INTRASKILL_REGISTRY_URL or http://127.0.0.1:8000)",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="one JSON document for scripts")]

TOKEN_HINT = (
    "set INTRASKILL_REGISTRY_TOKEN to a token the registry knows "
    "(`intraskill registry serve` prints one in demo mode; `intraskill registry token` mints one)"
)


class OperatorError(Exception):
    """A failure already phrased for the person at the terminal: what went wrong, what to do."""


def explain(error: RegistryError, *, url: str, subject: str) -> str:
    """One sentence per registry failure, naming the thing and the next step."""
    detail = error.detail
    if isinstance(error, Unavailable):
        if error.status_code == 0:
            return (
                f"cannot reach the registry at {url}: start it (`intraskill registry serve`) "
                "or point --registry / INTRASKILL_REGISTRY_URL at it"
            )
        return f"the registry at {url} failed ({error.status_code}: {detail}); see its log"
    if isinstance(error, AuthError):
        if error.status_code == 401:
            return f"the registry refused the token: {TOKEN_HINT}"
        return f"this token's role may not change {subject} ({detail}); use an operator token"
    if isinstance(error, PreconditionFailed):
        return (
            f"someone moved {subject} since you read it (stale ETag): "
            f"re-run `intraskill bank show {subject.split()[-1]}` and decide again"
        )
    if isinstance(error, NotFound):
        return f"{subject} does not exist ({detail}); `intraskill bank list` shows the banks"
    if isinstance(error, Conflict):
        return f"the registry refused the change to {subject}: {detail}"
    if isinstance(error, Invalid):
        return f"the registry rejected the request for {subject}: {_fields(detail)}"
    if error.status_code == 428:
        return f"{subject} can only be moved with its current ETag: pass --expect ETAG"
    return f"{subject}: registry answered {error.status_code}: {detail}"


def _fields(detail: Any) -> str:
    if not isinstance(detail, list):
        return str(detail)
    return "; ".join(
        f"{'.'.join(str(part) for part in item.get('loc', []))}: {item.get('msg')}"
        for item in detail
        if isinstance(item, dict)
    )


@contextmanager
def registry(url: str | None, *, subject: str) -> Iterator[RegistryClient]:
    """A client for the command's registry; registry errors become `OperatorError` sentences."""
    settings = OperatorSettings()
    base_url = url or settings.registry_url
    if settings.registry_token is None:
        raise OperatorError(f"no registry token: {TOKEN_HINT}")
    # Two quick retries: a person is waiting, and a down registry should say so in seconds.
    client = RegistryClient(
        base_url, settings.registry_token.get_secret_value(), retries=2, backoff=0.2
    )
    try:
        yield client
    except RegistryError as error:
        raise OperatorError(explain(error, url=base_url, subject=subject)) from error
    finally:
        client.close()


def console() -> Console:
    # Built per call so output follows sys.stdout as it is now (tests capture it).
    return Console(file=sys.stdout, width=max(100, Console().width))


def print_json(value: Any) -> None:
    """Pydantic models, lists of them and plain data, as indented UTF-8 JSON."""
    print(json.dumps(_plain(value), ensure_ascii=False, indent=2))


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    """A rich table; numbers right-aligned, None shown as a dash."""
    grid = Table(title=title, title_justify="left", show_lines=False)
    for name in columns:
        grid.add_column(name)
    for row in rows:
        grid.add_row(*("-" if cell is None else str(cell) for cell in row))
    return grid


def number(value: float | None, digits: int = 3) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def run_app(app: typer.Typer, argv: list[str], prog_name: str) -> int:
    """Run a typer app; an `OperatorError` prints its sentence on stderr and exits 1."""
    try:
        # without standalone mode, click returns a typer.Exit's code instead of raising it
        result = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except OperatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except typer.Exit as done:
        return done.exit_code
    except Exception as error:  # click usage errors carry their own exit code and message
        code = getattr(error, "exit_code", None)
        if code is None:
            raise
        show: Callable[[], None] | None = getattr(error, "show", None)
        if show:
            show()
        return code
    return result if isinstance(result, int) else 0
