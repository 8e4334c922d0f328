"""The evaluator service: gate, Gate A and evaluation jobs over HTTP (POST -> 202 + job id,
GET polls).

    intraskill gate serve --port 8100       # reads EVALUATOR_* settings

Routes are thin: validate, plan what is cheap to check now (so a bad request is a 4xx naming
the field, not a failed job), submit the job. Every route but `/healthz`, `/readyz` and
`/metrics` wants a bearer token (`shared/kit/auth.py`, grants in EVALUATOR_TOKENS) whose role the
route admits (`SUBMITTERS`, `OBSERVERS`): 401 without one, 403 for another role. Bodies pass
`shared/kit/request_body.py` first (413 past 1 MiB, 401 before the body is read). A job POST may
carry an `Idempotency-Key` (the caller's own, bound to the body: replay or 409); each submitter
role queues at most `max_queued` jobs (429 + Retry-After). The probes are coroutines that wait
for no worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status

from services.evaluator.decision import decide
from services.evaluator.design import DesignError, RankDeficientError
from services.evaluator.fit import FitError
from services.evaluator.gate_job import (
    RECORDS_FILE,
    REGISTRY_RETRY_AFTER_S,
    gate_job,
    plan_gate_a_job,
    plan_gate_job,
    registry_error_status,
)
from services.evaluator.reaper import GateRunReaper
from services.evaluator.records import load_gate_run
from services.evaluator.runtime import RunnerFactory, agent_runner_factory, make_env
from services.evaluator.settings import EvaluatorSettings
from shared.contracts.evaluator_api.schemas import (
    DESIGN_NOT_IDENTIFIED,
    EvalJobCreate,
    GateAJobCreate,
    GateJobCreate,
    RefitCreate,
)
from shared.contracts.registry_api.client import RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import Principal, TokenTable, install_auth_errors, publish_roles, require_roles
from shared.kit.observability import instrument
from shared.kit.readiness import READY_RETRY_AFTER_S, folder_writable, registry_checks
from shared.kit.request_body import SERVICE_JSON_DEPTH, RequestBodyGuard
from shared.kit.service_jobs import JobPublic, JobStore, submit_as
from shared.kit.validation_errors import install_validation_errors, json_safe

TaskSource = Callable[[str], list[str]]
# Who may do what: each job kind is submitted by the role whose work it is (the trainer's
# interval gates, the analyst's cold-start Gate A, an operator's test-set evaluation) and read
# by that role, operators and readers. Any other role is a 403.
SUBMITTERS = {"gate": Role.trainer, "gate-a": Role.analyst, "eval": Role.operator}
OBSERVERS = (Role.operator, Role.reader)


def may_submit(kind: str):
    return Depends(require_roles(SUBMITTERS[kind]))


def may_read(kind: str):
    return Depends(require_roles(SUBMITTERS[kind], *OBSERVERS))


def _job_store(request: Request) -> JobStore:
    return request.app.state.jobs


Jobs = Annotated[JobStore, Depends(_job_store)]
IdempotencyKey = Annotated[
    str | None, Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
]
# A registry read made while answering a request: a registry that does not answer is a 503
# within seconds, not after the background client's retries (~50 s), and holds no pool thread
# for long.
PLANNING_TIMEOUT_S, PLANNING_RETRIES = 3.0, 1


def _unprocessable(loc: list[str], message: str, kind: str = "value_error") -> HTTPException:
    problem = {"loc": ["body", *loc], "msg": json_safe(message), "type": kind}
    return HTTPException(422, detail=[problem])


def _registry_failed(error: RegistryError) -> HTTPException:
    """The answer to a request whose registry read failed; a 503 says when to retry."""
    code = registry_error_status(error)
    headers = {"Retry-After": str(REGISTRY_RETRY_AFTER_S)} if code == 503 else None
    return HTTPException(code, detail=str(error), headers=headers)


class TaskSelectionError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def select_tasks_from(
    available: list[str], task_ids: list[str] | None, n_tasks: int | None, *, split: str = ""
) -> list[str]:
    """The requested tasks (default: the whole split), optionally only the first n."""
    if task_ids is not None:
        unknown = sorted(set(task_ids) - set(available))
        if unknown:
            raise TaskSelectionError(
                "task_ids", f"not in split {split!r}: {', '.join(unknown[:5])}"
            )
        if len(set(task_ids)) != len(task_ids):
            raise TaskSelectionError("task_ids", "task ids must be distinct")
        chosen = list(task_ids)
    else:
        chosen = list(available)
    if n_tasks is not None:
        if n_tasks > len(chosen):
            raise TaskSelectionError("n_tasks", f"only {len(chosen)} tasks available")
        chosen = chosen[:n_tasks]
    return chosen


def create_app(
    settings: EvaluatorSettings | None = None,
    *,
    runner_factory: RunnerFactory | None = None,
    client_factory: Callable[[], RegistryClient] | None = None,
    task_source: TaskSource | None = None,
) -> FastAPI:
    """The app; the factories default to the agent runtime, the registry and the ShopSim world."""
    settings = settings or EvaluatorSettings()
    runners = runner_factory or agent_runner_factory(settings)
    clients = client_factory or settings.registry_client
    planning_clients = client_factory or functools.partial(
        settings.registry_client, timeout=PLANNING_TIMEOUT_S, retries=PLANNING_RETRIES
    )

    @functools.cache
    def default_tasks(split: str) -> list[str]:
        return list(make_env(settings).task_ids(split))

    tasks_of = task_source or default_tasks

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.jobs = JobStore(
            settings.jobs_dir, max_workers=settings.max_workers, max_queued=settings.max_queued,
            retry_after_s=settings.queue_retry_after_s, name="evaluator",
            metrics=app.state.metrics,
        )  # fmt: skip
        reaper = GateRunReaper(clients, app.state.jobs, interval_s=settings.reap_interval_s)
        reaper.start()
        yield
        reaper.stop()
        app.state.jobs.shutdown()

    app = FastAPI(title="IntraSkill evaluator", version="1", lifespan=lifespan)
    app.state.tokens = TokenTable(settings.tokens)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=SERVICE_JSON_DEPTH,
        tokens=app.state.tokens,
    )  # fmt: skip
    install_auth_errors(app)
    install_validation_errors(app)
    instrument(app, "evaluator")

    def select_tasks(split: str, task_ids: list[str] | None, n_tasks: int | None) -> list[str]:
        """The tasks of a split the request may name (the split's name was validated)."""
        try:
            return select_tasks_from(tasks_of(split), task_ids, n_tasks, split=split)
        except TaskSelectionError as error:
            raise _unprocessable([error.field], str(error)) from None

    def job_public(job) -> JobPublic:
        return JobPublic(**job.public())

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (nothing else is asked, no worker thread waited for)."""
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "a dependency is not ready"}})
    async def readyz(response: Response) -> dict[str, Any]:
        """Readiness: what every job depends on. The registry answers its own /readyz and
        accepts EVALUATOR_REGISTRY_TOKEN (one authenticated call), some token is admitted, the
        jobs folder is writable. 503 + Retry-After otherwise."""
        checks = {
            **await registry_checks(
                settings.registry_url, settings.registry_token, "EVALUATOR_REGISTRY_TOKEN"
            ),
            "tokens": "ok" if len(app.state.tokens) else "EVALUATOR_TOKENS admits no token",
            "jobs_dir": folder_writable(settings.jobs_dir),
        }
        ready = all(result == "ok" for result in checks.values())
        if not ready:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            response.headers["Retry-After"] = str(READY_RETRY_AFTER_S)
        return {"status": "ready" if ready else "not ready", "checks": checks}

    def enqueue(kind, body, work, store: JobStore, caller: Principal, key, response) -> JobPublic:
        """Submit a job as `caller` (its role's lane, its own idempotency keys)."""
        job = submit_as(store, kind, body, work, caller, key)
        response.headers["Location"] = f"/v1/{kind}-jobs/{job.id}"
        return job_public(job)

    def submit_gate(
        kind: str, body, planner, store: JobStore, caller: Principal, key, response: Response
    ) -> JobPublic:
        """Plan a gate now (registry reads, rank check), run its rollouts as a job."""
        if body.bare_from_job is not None:
            # Only a job of the same kind: one the caller's role may read, whose records exist.
            # Any other id reads as unknown, so the answer does not tell which ids exist.
            earlier = store.get(body.bare_from_job)
            records = settings.jobs_dir / body.bare_from_job / RECORDS_FILE
            if earlier is None or earlier.kind != kind or not records.is_file():
                raise _unprocessable(
                    ["bare_from_job"], f"no {kind} job {body.bare_from_job!r} with rollouts"
                )
        task_ids = select_tasks(settings.split, body.task_ids, body.n_tasks)
        client = planning_clients()
        try:
            planned = planner(body, client, settings, task_ids)
        except RegistryError as error:
            raise _registry_failed(error) from None
        except DesignError as error:
            problem = "value_error"
            if isinstance(error, RankDeficientError):
                problem = DESIGN_NOT_IDENTIFIED
            raise _unprocessable([error.field or "task_ids"], str(error), problem) from None
        finally:
            client.close()
        work = gate_job(
            planned,
            client_factory=clients,
            runner_factory=runners,
            jobs_root=settings.jobs_dir,
            empty_bank=settings.empty_bank,
        )
        return enqueue(kind, body, work, store, caller, key, response)

    @app.post(
        "/v1/gate-jobs", status_code=status.HTTP_202_ACCEPTED, response_model=JobPublic,
        responses={409: {}, 429: {}, 503: {}},
    )  # fmt: skip
    def create_gate_job(
        body: GateJobCreate,
        store: Jobs,
        response: Response,
        caller: Annotated[Principal, may_submit("gate")],
        idempotency_key: IdempotencyKey = None,
    ) -> JobPublic:
        """An interval gate: base bank + the round's candidates; S_{t+1}, `current` moves."""
        return submit_gate("gate", body, plan_gate_job, store, caller, idempotency_key, response)

    @app.post(
        "/v1/gate-a-jobs", status_code=status.HTTP_202_ACCEPTED, response_model=JobPublic,
        responses={409: {}, 429: {}, 503: {}},
    )  # fmt: skip
    def create_gate_a_job(
        body: GateAJobCreate,
        store: Jobs,
        response: Response,
        caller: Annotated[Principal, may_submit("gate-a")],
        idempotency_key: IdempotencyKey = None,
    ) -> JobPublic:
        """Gate A (cold start): draft chunk versions; S_0, `current` moves (or is created)."""
        return submit_gate(
            "gate-a", body, plan_gate_a_job, store, caller, idempotency_key, response
        )

    @app.post(
        "/v1/eval-jobs", status_code=status.HTTP_202_ACCEPTED, response_model=JobPublic,
        responses={409: {}, 429: {}, 503: {}},
    )  # fmt: skip
    def create_eval_job(
        body: EvalJobCreate,
        store: Jobs,
        response: Response,
        caller: Annotated[Principal, may_submit("eval")],
        idempotency_key: IdempotencyKey = None,
    ) -> JobPublic:
        """Test-set evaluation of several conditions, one rollout per task each, as a job."""
        from services.evaluator.evaluation import eval_job, plan_eval_job

        task_ids = select_tasks(body.split, body.task_ids, body.n_tasks)
        client = planning_clients()
        try:
            planned = plan_eval_job(body, client, settings, task_ids)
        except RegistryError as error:
            raise _registry_failed(error) from None
        except ValueError as error:
            raise _unprocessable(["conditions"], str(error)) from None
        finally:
            client.close()
        work = eval_job(planned, runner_factory=runners, client_factory=clients)
        return enqueue("eval", body, work, store, caller, idempotency_key, response)

    def get_job(store: JobStore, kind: str, job_id: str) -> JobPublic:
        job = store.get(job_id)
        if job is None or job.kind != kind:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no {kind} job {job_id!r}")
        return job_public(job)

    @app.get("/v1/gate-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("gate")])
    def read_gate_job(job_id: str, store: Jobs) -> JobPublic:
        return get_job(store, "gate", job_id)

    @app.get(
        "/v1/gate-a-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("gate-a")]
    )
    def read_gate_a_job(job_id: str, store: Jobs) -> JobPublic:
        return get_job(store, "gate-a", job_id)

    @app.get("/v1/eval-jobs/{job_id}", response_model=JobPublic, dependencies=[may_read("eval")])
    def read_eval_job(job_id: str, store: Jobs) -> JobPublic:
        return get_job(store, "eval", job_id)

    def list_jobs(store: JobStore, kind: str, status_filter: str | None) -> list[JobPublic]:
        return [
            job_public(job)
            for job in store.list(kind)
            if status_filter is None or job.status == status_filter
        ]

    @app.get("/v1/gate-jobs", response_model=list[JobPublic], dependencies=[may_read("gate")])
    def list_gate_jobs(
        store: Jobs, status_filter: Annotated[str | None, Query(alias="status")] = None
    ) -> list[JobPublic]:
        return list_jobs(store, "gate", status_filter)

    @app.get("/v1/gate-a-jobs", response_model=list[JobPublic], dependencies=[may_read("gate-a")])
    def list_gate_a_jobs(
        store: Jobs, status_filter: Annotated[str | None, Query(alias="status")] = None
    ) -> list[JobPublic]:
        return list_jobs(store, "gate-a", status_filter)

    @app.post("/v1/refits", dependencies=[may_read("gate")], responses={503: {}})
    def refit(body: RefitCreate) -> dict[str, Any]:
        """Re-fit and re-select a stored gate from its raw observations (synchronous): 404
        for a gate run the registry does not have, 503 + Retry-After when it is away."""
        client = planning_clients()
        try:
            design, observations, solver = load_gate_run(body.gate_run_id, client)
            decision = decide(
                design,
                observations,
                budget=body.budget,
                solver=body.solver or solver,
                admit=body.admit,
            )
        except LookupError as error:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(error)) from None
        except RegistryError as error:
            if registry_error_status(error) == 422:
                raise _unprocessable(["gate_run_id"], str(error)) from None
            raise _registry_failed(error) from None
        except (DesignError, FitError) as error:
            raise _unprocessable(["gate_run_id"], str(error)) from None
        finally:
            client.close()
        return decision.as_json(intervals=True)

    publish_roles(app.routes)
    return app
