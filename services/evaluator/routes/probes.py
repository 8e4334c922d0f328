"""`/healthz` and `/readyz`: coroutines that wait for no worker thread (under load every thread
may be stuck on a registry that does not answer)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from services.evaluator.deps import Context
from shared.contracts.readiness import Readiness
from shared.kit.readiness import folder_writable, readiness_answer, registry_checks, tokens_admitted

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (nothing else is asked, no worker thread waited for)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"description": "a dependency is not ready"}},
)
async def readyz(request: Request, response: Response, context: Context) -> Readiness:
    """Readiness: what every job depends on. The registry answers its own /readyz and accepts
    EVALUATOR_REGISTRY_TOKEN (one authenticated call), some token is admitted, the jobs folder
    is writable. 503 + Retry-After otherwise."""
    settings = context.settings
    checks = {
        **await registry_checks(
            settings.registry_url, settings.registry_token, "EVALUATOR_REGISTRY_TOKEN"
        ),
        "tokens": tokens_admitted(request.app.state.tokens, "EVALUATOR_TOKENS"),
        "jobs_dir": folder_writable(settings.jobs_dir),
    }
    return readiness_answer(checks, response)
