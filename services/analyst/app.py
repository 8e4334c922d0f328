"""The analyst service: all-wrong groups in, round compilations and the cold start as async
jobs (POST -> 202 + job id, GET polls), funnels out.

    intraskill analyst serve --port 8200      # reads ANALYST_* settings

Routes are thin: validate, store or submit, answer. The contract is `shared/analyst_api`.
Every route but `/healthz`, `/readyz` and `/metrics` wants a bearer token (`shared/auth.py`,
grants in ANALYST_TOKENS) whose role the route admits: 401 without one, 403 for another role.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status

from services.analyst.settings import AnalystSettings
from services.analyst.store import GroupConflict, GroupStore
from shared.analyst_api.schemas import (
    AllWrongGroupPublic,
    AllWrongGroupSubmit,
    ColdStartCreate,
    CompileRoundCreate,
    FunnelCounts,
    JobPublic,
    Readiness,
)
from shared.auth import TokenTable, install_auth_errors, publish_roles, require_roles
from shared.observability import instrument
from shared.readiness import READY_RETRY_AFTER_S, folder_writable, registry_ready
from shared.registry_api.client import RegistryClient
from shared.registry_api.schemas import Role
from shared.request_body import SERVICE_JSON_DEPTH, RequestBodyGuard
from shared.service_jobs import JobStore, now

# Who may do what: the trainer hands in its all-wrong groups and asks for each round's compile;
# an operator starts the cold start; the trainer, operators and readers read. Any other role
# (the evaluator's, the analyst's own) is a 403.
TRAINER = Depends(require_roles(Role.trainer))
OPERATOR = Depends(require_roles(Role.operator))
READERS = Depends(require_roles(Role.trainer, Role.operator, Role.reader))


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

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.jobs = JobStore(
            settings.data_dir / "jobs", max_workers=settings.max_workers, name="analyst",
            metrics=app.state.metrics,
        )  # fmt: skip
        app.state.groups = GroupStore(settings.data_dir)
        yield
        app.state.jobs.shutdown()

    app = FastAPI(title="IntraSkill analyst", version="1", lifespan=lifespan)
    app.state.tokens = TokenTable(settings.tokens)
    app.add_middleware(
        RequestBodyGuard, max_bytes=settings.max_body_bytes, max_depth=SERVICE_JSON_DEPTH,
        tokens=app.state.tokens,
    )  # fmt: skip
    install_auth_errors(app)
    instrument(app, "analyst")

    def jobs(request: Request) -> JobStore:
        return request.app.state.jobs

    def groups(request: Request) -> GroupStore:
        return request.app.state.groups

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", response_model=Readiness)
    def readyz(response: Response) -> Readiness:
        """Ready when the registry's /readyz answers, some token is admitted and the data
        folder is writable; 503 + Retry-After otherwise (the evaluator's checks)."""
        checks = {
            "registry": registry_ready(settings.registry_url),
            "registry_token": "ok" if settings.registry_token else "missing",
            "tokens": "ok" if len(app.state.tokens) else "ANALYST_TOKENS admits no token",
            "data_dir": folder_writable(settings.data_dir),
        }
        ready = all(value == "ok" for value in checks.values())
        if not ready:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            response.headers["Retry-After"] = str(READY_RETRY_AFTER_S)
        return Readiness(ready=ready, checks=checks)

    @app.post(
        "/v1/all-wrong-groups",
        status_code=201,
        response_model=AllWrongGroupPublic,
        dependencies=[TRAINER],
    )
    def submit_group(
        body: AllWrongGroupSubmit, request: Request, response: Response
    ) -> AllWrongGroupPublic:
        """Record an all-wrong group (idempotent on run, round, step and group index)."""
        try:
            record = groups(request).submit(body, now())
        except GroupConflict as error:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=str(error)) from None
        if record.replayed:
            response.status_code = status.HTTP_200_OK
        response.headers["Location"] = f"/v1/all-wrong-groups/{record.id}"
        return record

    @app.get(
        "/v1/all-wrong-groups/{group_id}",
        response_model=AllWrongGroupPublic,
        dependencies=[READERS],
    )
    def read_group(group_id: str, request: Request) -> AllWrongGroupPublic:
        record = groups(request).get(group_id)
        if record is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no group {group_id!r}")
        return record

    @app.get(
        "/v1/all-wrong-groups", response_model=list[AllWrongGroupPublic], dependencies=[READERS]
    )
    def list_groups(
        request: Request,
        run_id: str | None = None,
        round: Annotated[int | None, Query(ge=0)] = None,
        status_filter: Annotated[str | None, Query(alias="status")] = None,
    ) -> list[AllWrongGroupPublic]:
        return groups(request).list(run_id=run_id, round=round, status=status_filter)

    @app.get("/v1/funnel", response_model=FunnelCounts, dependencies=[READERS])
    def funnel(request: Request, run_id: str, round: Annotated[int, Query(ge=0)]) -> FunnelCounts:
        return groups(request).funnel(run_id, round)

    def submit(kind, body, work, request: Request, response: Response, key) -> JobPublic:
        job = jobs(request).submit(kind, body.model_dump(mode="json"), work, key=key)
        response.headers["Location"] = f"/v1/jobs/{job.id}"
        return JobPublic(**job.public())

    @app.post("/v1/compile-jobs", status_code=202, response_model=JobPublic, dependencies=[TRAINER])
    def create_compile_job(
        body: CompileRoundCreate,
        request: Request,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> JobPublic:
        """Retries, analysis and compilation of a round, on its frozen checkpoint and bank."""
        from services.analyst.slow_loop import compile_round_job

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

        return submit("compile", body, work, request, response, idempotency_key)

    @app.post(
        "/v1/cold-start-jobs", status_code=202, response_model=JobPublic, dependencies=[OPERATOR]
    )
    def create_cold_start_job(
        body: ColdStartCreate,
        request: Request,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> JobPublic:
        """Trace2Skill cold start: bare runs -> cards -> drafts -> Gate A -> S_0."""
        from services.analyst.cold_start import cold_start_job

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

        return submit("cold-start", body, work, request, response, idempotency_key)

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
