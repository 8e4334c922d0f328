"""What the analyst's routes depend on: the app's context (settings, registry clients, the
backends a job uses), the job and group stores, who may do what, and the errors a route raises."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request

from services.analyst.settings import AnalystSettings
from services.analyst.store import GroupStore
from shared.contracts.registry_api.client import RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import require_roles
from shared.kit.service_jobs import JobStore
from shared.kit.validation_errors import json_safe

# Who may do what: the trainer hands in its all-wrong groups and asks for each round's compile;
# an operator starts the cold start; the trainer, operators and readers read. Any other role
# (the evaluator's, the analyst's own) is a 403.
TRAINER = Depends(require_roles(Role.trainer))
OPERATOR = Depends(require_roles(Role.operator))
READERS = Depends(require_roles(Role.trainer, Role.operator, Role.reader))
SLUG = r"^[a-z0-9][a-z0-9._-]{0,63}$"  # a run id, as the contract's Slug
# Registry reads made while answering a request: a registry away is a 503 within seconds.
PLANNING_TIMEOUT_S, PLANNING_RETRIES = 3.0, 1
REGISTRY_RETRY_AFTER_S = 5


@dataclass(frozen=True)
class AnalystContext:
    """The app's settings, registry clients (the jobs' own, and short ones for reads made while
    answering) and the backends given to `create_app` (None: the request's by name)."""

    settings: AnalystSettings
    clients: Callable[[], RegistryClient]
    planning_clients: Callable[[], RegistryClient]
    analyzer: Any = None
    similar: Any = None
    compiler: Any = None

    @classmethod
    def build(cls, settings: AnalystSettings, client_factory, **backends: Any) -> AnalystContext:
        planning = functools.partial(
            settings.registry_client, timeout=PLANNING_TIMEOUT_S, retries=PLANNING_RETRIES
        )
        return cls(
            settings=settings,
            clients=client_factory or settings.registry_client,
            planning_clients=client_factory or planning,
            **backends,
        )

    def analyzer_for(self, name: str):
        """The failure analyst: the one given to the app, else the backend named `name`."""
        if self.analyzer is not None:
            return self.analyzer
        if name == "rules":
            from services.analyst.rules_backend import analyze

            return analyze
        from services.analyst.llm_backend import LLMAnalyst

        return LLMAnalyst.from_settings(self.settings).analyze

    def compiler_for(self, name: str):
        """The round compiler: the one given to the app, else the backend named `name`."""
        return self.compiler if self.compiler is not None else compiler_named(name, self.settings)


def compiler_named(name: str, settings: AnalystSettings):
    """The round compiler backend by name (same arguments and result for both)."""
    from services.analyst.compiler import compile_round

    if name == "deterministic":
        return compile_round
    from services.analyst.llm_compiler import LLMCompiler

    return LLMCompiler.from_settings(settings).compile


# Coroutines, so that resolving them waits for no worker thread (the probes use them too).
async def _context(request: Request) -> AnalystContext:
    return request.app.state.context


async def _jobs(request: Request) -> JobStore:
    return request.app.state.jobs


async def _groups(request: Request) -> GroupStore:
    return request.app.state.groups


Context = Annotated[AnalystContext, Depends(_context)]
Jobs = Annotated[JobStore, Depends(_jobs)]
Groups = Annotated[GroupStore, Depends(_groups)]
IdempotencyKey = Annotated[
    str | None, Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
]


def unprocessable(loc: list[str], message: str) -> HTTPException:
    problem = {"loc": ["body", *loc], "msg": json_safe(message), "type": "value_error"}
    return HTTPException(422, detail=[problem])


def registry_away(error: RegistryError) -> HTTPException:
    if error.status_code in (401, 403):  # our own token: a deployment problem
        return HTTPException(502, detail=f"the registry refused the analyst's token: {error}")
    return HTTPException(
        503, detail=f"the registry is unavailable: {error}",
        headers={"Retry-After": str(REGISTRY_RETRY_AFTER_S)},
    )  # fmt: skip


def shown_path(uri: str, data_dir: Path) -> str:
    """A trace named inside the data folder, not by its path on this server."""
    path = Path(uri.removeprefix("file://"))
    for root in (data_dir.resolve(), data_dir):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return path.name
