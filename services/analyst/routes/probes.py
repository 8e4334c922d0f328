"""`/healthz` and `/readyz`: coroutines that wait for no worker thread."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from services.analyst.deps import Context
from shared.contracts.readiness import Readiness
from shared.kit.readiness import folder_writable, readiness_answer, registry_checks, tokens_admitted

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"description": "a dependency is not ready"}},
)
async def readyz(request: Request, response: Response, context: Context) -> Readiness:
    """Ready when the registry's /readyz answers and it accepts ANALYST_REGISTRY_TOKEN, some
    token is admitted and the data folder is writable; 503 + Retry-After otherwise (the
    evaluator's checks)."""
    settings = context.settings
    checks = {
        **await registry_checks(
            settings.registry_url, settings.registry_token, "ANALYST_REGISTRY_TOKEN"
        ),
        "tokens": tokens_admitted(request.app.state.tokens, "ANALYST_TOKENS"),
        "data_dir": folder_writable(settings.data_dir),
    }
    return readiness_answer(checks, response)
