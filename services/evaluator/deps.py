"""What the evaluator's routes depend on: the app's context (settings, the factories, the task
lists), the job store, who may submit or read each job kind, and the errors a route raises."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from services.evaluator.gate_job import REGISTRY_RETRY_AFTER_S, registry_error_status
from services.evaluator.runtime import RunnerFactory, agent_runner_factory, make_env
from services.evaluator.settings import EvaluatorSettings
from services.evaluator.task_selection import TaskSelectionError, select_tasks_from
from shared.contracts.registry_api.client import RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import require_roles
from shared.kit.service_jobs import JobStore
from shared.kit.validation_errors import json_safe

TaskSource = Callable[[str], list[str]]
# Who may do what: each job kind is submitted by the role whose work it is (the trainer's
# interval gates, the analyst's cold-start Gate A, an operator's test-set evaluation) and read
# by that role, operators and readers. Any other role is a 403.
SUBMITTERS = {"gate": Role.trainer, "gate-a": Role.analyst, "eval": Role.operator}
OBSERVERS = (Role.operator, Role.reader)
# A registry read made while answering a request: a registry that does not answer is a 503
# within seconds, not after the background client's retries (~50 s), and holds no pool thread
# for long.
PLANNING_TIMEOUT_S, PLANNING_RETRIES = 3.0, 1


def may_submit(kind: str):
    return Depends(require_roles(SUBMITTERS[kind]))


def may_read(kind: str):
    return Depends(require_roles(SUBMITTERS[kind], *OBSERVERS))


@dataclass(frozen=True)
class EvaluatorContext:
    """The app's settings and factories: rollouts, registry clients (the jobs' own, and short
    ones for reads made while answering), and each split's task ids."""

    settings: EvaluatorSettings
    runners: RunnerFactory
    clients: Callable[[], RegistryClient]
    planning_clients: Callable[[], RegistryClient]
    tasks_of: TaskSource

    @classmethod
    def build(
        cls,
        settings: EvaluatorSettings,
        runner_factory: RunnerFactory | None,
        client_factory: Callable[[], RegistryClient] | None,
        task_source: TaskSource | None,
    ) -> EvaluatorContext:
        """The defaults: the agent runtime, the settings' registry, the ShopSim world."""

        @functools.cache
        def world_tasks(split: str) -> list[str]:
            return list(make_env(settings).task_ids(split))

        planning = functools.partial(
            settings.registry_client, timeout=PLANNING_TIMEOUT_S, retries=PLANNING_RETRIES
        )
        return cls(
            settings=settings,
            runners=runner_factory or agent_runner_factory(settings),
            clients=client_factory or settings.registry_client,
            planning_clients=client_factory or planning,
            tasks_of=task_source or world_tasks,
        )

    def select_tasks(
        self, split: str, task_ids: list[str] | None, n_tasks: int | None
    ) -> list[str]:
        """The tasks of a split the request may name (the split's name was validated)."""
        try:
            return select_tasks_from(self.tasks_of(split), task_ids, n_tasks, split=split)
        except TaskSelectionError as error:
            raise unprocessable([error.field], str(error)) from None


# Coroutines, so that resolving them waits for no worker thread (the probes use them too).
async def _context(request: Request) -> EvaluatorContext:
    return request.app.state.context


async def _job_store(request: Request) -> JobStore:
    return request.app.state.jobs


Context = Annotated[EvaluatorContext, Depends(_context)]
Jobs = Annotated[JobStore, Depends(_job_store)]
IdempotencyKey = Annotated[
    str | None, Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
]


def unprocessable(loc: list[str], message: str, kind: str = "value_error") -> HTTPException:
    problem = {"loc": ["body", *loc], "msg": json_safe(message), "type": kind}
    return HTTPException(422, detail=[problem])


def registry_failed(error: RegistryError) -> HTTPException:
    """The answer to a request whose registry read failed; a 503 says when to retry."""
    code = registry_error_status(error)
    headers = {"Retry-After": str(REGISTRY_RETRY_AFTER_S)} if code == 503 else None
    return HTTPException(code, detail=str(error), headers=headers)
