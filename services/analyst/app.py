"""The analyst service: all-wrong groups in, round compilations and the cold start as async
jobs (POST -> 202 + job id, GET polls), funnels out.

    intraskill analyst serve --port 8200      # reads ANALYST_* settings

Routes are thin: validate, store or submit, answer. The contract is `shared/contracts/analyst_api`.
Every route but `/healthz`, `/readyz` and `/metrics` wants a bearer token (`shared/kit/auth.py`,
grants in ANALYST_TOKENS) whose role the route admits: 401 without one, 403 for another role.
Bodies pass `shared/kit/request_body.py` first (413 past 1 MiB, 401 before the body is read). A job
POST's `Idempotency-Key` is the caller's own, bound to the body (replay, or 409); what a job
needs from the registry is checked at submit (422 naming the field, 503 + Retry-After when the
registry is away); each submitter role queues at most `max_queued` jobs (429 + Retry-After).
The probes are coroutines that wait for no worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status
from fastapi import Path as FastPath

from services.analyst.settings import AnalystSettings
from services.analyst.store import GroupConflict, GroupQuotaFull, GroupStore
from shared.contracts.analyst_api.schemas import (
    AllWrongGroupPublic,
    AllWrongGroupSubmit,
    ColdStartCreate,
    CompileRoundCreate,
    FunnelCounts,
    GroupStatus,
    JobPublic,
    Readiness,
)
from shared.contracts.registry_api.client import NotFound, RegistryClient, RegistryError
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import Principal, TokenTable, install_auth_errors, publish_roles, require_roles
from shared.kit.observability import instrument
from shared.kit.readiness import READY_RETRY_AFTER_S, folder_writable, registry_checks
from shared.kit.request_body import SERVICE_JSON_DEPTH, RequestBodyGuard
from shared.kit.service_jobs import JobStore, now, submit_as
from shared.kit.validation_errors import install_validation_errors, json_safe

# Who may do what: the trainer hands in its all-wrong groups and asks for each round's compile;
# an operator starts the cold start; the trainer, operators and readers read. Any other role
# (the evaluator's, the analyst's own) is a 403.
TRAINER = Depends(require_roles(Role.trainer))
OPERATOR = Depends(require_roles(Role.operator))
READERS = Depends(require_roles(Role.trainer, Role.operator, Role.reader))
SLUG = r"^[a-z0-9][a-z0-9._-]{0,63}$"  # a run id, as the contract's Slug
IdempotencyKey = Annotated[
    str | None, Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
]
# Registry reads made while answering a request: a registry away is a 503 within seconds.
PLANNING_TIMEOUT_S, PLANNING_RETRIES = 3.0, 1
REGISTRY_RETRY_AFTER_S = 5
MAX_PAGE = 500  # groups per listing page


def _unprocessable(loc: list[str], message: str) -> HTTPException:
    problem = {"loc": ["body", *loc], "msg": json_safe(message), "type": "value_error"}
    return HTTPException(422, detail=[problem])


def _registry_away(error: RegistryError) -> HTTPException:
    if error.status_code in (401, 403):  # our own token: a deployment problem
        return HTTPException(502, detail=f"the registry refused the analyst's token: {error}")
    return HTTPException(
        503, detail=f"the registry is unavailable: {error}",
        headers={"Retry-After": str(REGISTRY_RETRY_AFTER_S)},
    )  # fmt: skip


def create_app(
    settings: AnalystSettings | None = None,
    *,
    client_factory: Callable[[], RegistryClient] | None = None,
    analyzer=None,
    similar=None,
    compiler=None,
) -> FastAPI:
    """The app; the registry client, the failure analyst, the compiler and the dedupe default
    to settings' and the request's backend names."""
    settings = settings or AnalystSettings()
    clients = client_factory or settings.registry_client
    planning_clients = client_factory or functools.partial(
        settings.registry_client, timeout=PLANNING_TIMEOUT_S, retries=PLANNING_RETRIES
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.jobs = JobStore(
            settings.data_dir / "jobs", max_workers=settings.max_workers,
            max_queued=settings.max_queued, retry_after_s=settings.queue_retry_after_s,
            name="analyst", metrics=app.state.metrics,
        )  # fmt: skip
        app.state.groups = GroupStore(
            settings.data_dir, max_per_caller=settings.max_groups_per_caller
        )
        yield
        app.state.jobs.shutdown()

    app = FastAPI(title="IntraSkill analyst", version="1", lifespan=lifespan)
    app.state.tokens = TokenTable(settings.tokens)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=SERVICE_JSON_DEPTH,
        tokens=app.state.tokens,
    )  # fmt: skip
    install_auth_errors(app)
    install_validation_errors(app)
    instrument(app, "analyst")

    def jobs(request: Request) -> JobStore:
        return request.app.state.jobs

    def groups(request: Request) -> GroupStore:
        return request.app.state.groups

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", response_model=Readiness)
    async def readyz(response: Response) -> Readiness:
        """Ready when the registry's /readyz answers and it accepts ANALYST_REGISTRY_TOKEN, some
        token is admitted and the data folder is writable; 503 + Retry-After otherwise (the
        evaluator's checks)."""
        checks = {
            **await registry_checks(
                settings.registry_url, settings.registry_token, "ANALYST_REGISTRY_TOKEN"
            ),
            "tokens": "ok" if len(app.state.tokens) else "ANALYST_TOKENS admits no token",
            "data_dir": folder_writable(settings.data_dir),
        }
        ready = all(value == "ok" for value in checks.values())
        if not ready:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            response.headers["Retry-After"] = str(READY_RETRY_AFTER_S)
        return Readiness(ready=ready, checks=checks)

    def shown(record: AllWrongGroupPublic) -> AllWrongGroupPublic:
        """A group as callers see it: a trace named inside the data folder, not by its path
        on this server."""
        uri = record.retry_trace_uri
        if uri is None:
            return record
        path = Path(uri.removeprefix("file://"))
        if path.is_relative_to(settings.data_dir.resolve()):
            uri = str(path.relative_to(settings.data_dir.resolve()))
        elif path.is_relative_to(settings.data_dir):
            uri = str(path.relative_to(settings.data_dir))
        else:
            uri = path.name
        return record.model_copy(update={"retry_trace_uri": uri})

    @app.post(
        "/v1/all-wrong-groups",
        status_code=201,
        response_model=AllWrongGroupPublic,
        responses={409: {}, 429: {}},
    )
    def submit_group(
        body: AllWrongGroupSubmit,
        request: Request,
        response: Response,
        caller: Annotated[Principal, TRAINER],
    ) -> AllWrongGroupPublic:
        """Record an all-wrong group (idempotent on run, round, step and group index). A caller
        writes at most ANALYST_MAX_GROUPS_PER_CALLER groups (429 past it: waiting frees
        nothing, so no Retry-After); a replay is not a write."""
        try:
            record = groups(request).submit(body, now(), caller.name)
        except GroupConflict as error:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=str(error)) from None
        except GroupQuotaFull as error:
            raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, detail=str(error)) from None
        if record.replayed:
            response.status_code = status.HTTP_200_OK
        response.headers["Location"] = f"/v1/all-wrong-groups/{record.id}"
        return shown(record)

    @app.get(
        "/v1/all-wrong-groups/{group_id}",
        response_model=AllWrongGroupPublic,
        dependencies=[READERS],
    )
    def read_group(
        group_id: Annotated[str, FastPath(pattern=r"^awg-[0-9a-f]{20}$")], request: Request
    ) -> AllWrongGroupPublic:
        record = groups(request).get(group_id)
        if record is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no group {group_id!r}")
        return shown(record)

    @app.get(
        "/v1/all-wrong-groups", response_model=list[AllWrongGroupPublic], dependencies=[READERS]
    )
    def list_groups(
        request: Request,
        response: Response,
        run_id: Annotated[str | None, Query(pattern=SLUG)] = None,
        round: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
        status_filter: Annotated[GroupStatus | None, Query(alias="status")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    ) -> list[AllWrongGroupPublic]:
        """One page of the groups, by (round, step, group index); `X-Total-Count` says how
        many match."""
        store = groups(request)
        response.headers["X-Total-Count"] = str(
            len(store.ids(run_id=run_id, round=round, status=status_filter))
        )
        page = store.list(
            run_id=run_id, round=round, status=status_filter, offset=offset, limit=limit
        )
        return [shown(record) for record in page]

    @app.get("/v1/funnel", response_model=FunnelCounts, dependencies=[READERS])
    def funnel(
        request: Request,
        run_id: Annotated[str, Query(pattern=SLUG)],
        round: Annotated[int, Query(ge=0, le=2**31 - 1)],
    ) -> FunnelCounts:
        return groups(request).funnel(run_id, round)

    def check_references(body, *, bank_id: int | None = None) -> None:
        """What the job needs from the registry exists (the checkpoint, the round's bank), so
        a bad reference is a 422 now and a registry that is away a 503, not a job that fails
        after its rollouts."""
        try:
            client = planning_clients()
        except LookupError as missing:  # no registry token: a deployment problem, not the call's
            detail = f"the analyst cannot reach the registry: {missing}"
            raise HTTPException(502, detail=detail) from None
        try:
            try:
                client.get_checkpoint(body.policy.checkpoint_id)
            except NotFound:
                raise _unprocessable(
                    ["policy", "checkpoint_id"], f"no checkpoint {body.policy.checkpoint_id!r}"
                ) from None
            if bank_id is not None:
                try:
                    bank = client.get_bank(bank_id)
                except NotFound:
                    raise _unprocessable(["bank_id"], f"no bank {bank_id}") from None
                if bank.content_hash is None:
                    raise _unprocessable(["bank_id"], f"bank {bank_id} is not frozen")
        except RegistryError as error:
            raise _registry_away(error) from None
        finally:
            client.close()

    def check_policy(body) -> None:
        """A policy that can load: weights named by a local folder must be there."""
        uri = body.policy.weights_uri
        from_disk = body.policy.backend in ("transformers", "vllm", "simulated")
        local = from_disk and uri is not None and uri.startswith("file://")
        if local and not Path(uri.removeprefix("file://")).exists():
            raise _unprocessable(["policy", "weights_uri"], f"no weights at {uri}")

    def submit(kind, body, work, request: Request, response: Response, caller, key) -> JobPublic:
        """Submit a job as `caller` (its role's lane, its own idempotency keys)."""
        job = submit_as(jobs(request), kind, body, work, caller, key)
        response.headers["Location"] = f"/v1/jobs/{job.id}"
        return JobPublic(**job.public())

    @app.post("/v1/compile-jobs", status_code=202, response_model=JobPublic)
    def create_compile_job(
        body: CompileRoundCreate,
        request: Request,
        response: Response,
        caller: Annotated[Principal, TRAINER],
        idempotency_key: IdempotencyKey = None,
    ) -> JobPublic:
        """Retries, analysis and compilation of a round, on its frozen checkpoint and bank."""
        from services.analyst.slow_loop import compile_round_job

        check_policy(body)
        check_references(body, bank_id=body.bank_id)
        store = groups(request)

        def work(context) -> dict:
            client = clients()
            try:
                return compile_round_job(
                    body, settings=settings, store=store, client=client,
                    analyzer=analyzer or _analyzer(body.analyst_backend, settings),
                    folder=context.folder, progress=context.progress, similar=similar,
                    compiler=compiler or _compiler(body.compiler_backend, settings),
                )  # fmt: skip
            finally:
                client.close()

        return submit("compile", body, work, request, response, caller, idempotency_key)

    @app.post("/v1/cold-start-jobs", status_code=202, response_model=JobPublic)
    def create_cold_start_job(
        body: ColdStartCreate,
        request: Request,
        response: Response,
        caller: Annotated[Principal, OPERATOR],
        idempotency_key: IdempotencyKey = None,
    ) -> JobPublic:
        """Trace2Skill cold start: bare runs -> cards -> drafts -> Gate A -> S_0."""
        from services.analyst.cold_start import cold_start_job

        check_policy(body)
        if body.gate_a_tasks is not None:
            available = validation_tasks(body.env_preset)
            if available is not None and body.gate_a_tasks > available:
                raise _unprocessable(["gate_a_tasks"], f"the val split has only {available} tasks")
        check_references(body)

        def work(context) -> dict:
            client = clients()
            try:
                return cold_start_job(
                    body, settings=settings, client=client,
                    analyzer=analyzer or _analyzer(body.analyst_backend, settings),
                    folder=context.folder, progress=context.progress,
                )  # fmt: skip
            finally:
                client.close()

        return submit("cold-start", body, work, request, response, caller, idempotency_key)

    def validation_tasks(preset: str) -> int | None:
        """The val split's size of the world Gate A runs on (None: a world folder decides)."""
        from shared.runtime.shopsim.presets import PRESETS

        return None if settings.env_path else PRESETS[preset].counts["val"]

    @app.get("/v1/jobs/{job_id}", response_model=JobPublic, dependencies=[READERS])
    def read_job(job_id: str, request: Request) -> JobPublic:
        job = jobs(request).get(job_id)
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id!r}")
        return JobPublic(**job.public())

    publish_roles(app.routes)
    return app


def _analyzer(name: str, settings: AnalystSettings):
    """The failure analyst backend by name."""
    if name == "rules":
        from services.analyst.rules_backend import analyze

        return analyze
    from services.analyst.llm_backend import LLMAnalyst

    return LLMAnalyst.from_settings(settings).analyze


def _compiler(name: str, settings: AnalystSettings):
    """The round compiler backend by name (same arguments and result for both)."""
    from services.analyst.compiler import compile_round

    if name == "deterministic":
        return compile_round
    from services.analyst.llm_compiler import LLMCompiler

    return LLMCompiler.from_settings(settings).compile
