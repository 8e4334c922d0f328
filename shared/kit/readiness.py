"""The readiness checks the evaluator and the analyst share: does the registry answer its own
/readyz in time, does it accept the service's own token, and can the service write its folder.

A probe must answer fast and must never wait for a worker thread (under load every thread may be
stuck on a registry that does not answer): the checks are coroutines on the event loop, and a
503 says when to ask again."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sized
from pathlib import Path

import httpx
from fastapi import APIRouter, Request, Response
from pydantic import SecretStr

from shared.contracts.readiness import Readiness

READY_TIMEOUT_S = 2.0  # a readiness probe must answer fast; the registry's own is one query
READY_RETRY_AFTER_S = 5


async def registry_ready(url: str) -> str:
    """ "ok" when the registry's /readyz answers 200 in time, else what went wrong."""
    try:
        async with httpx.AsyncClient(timeout=READY_TIMEOUT_S) as http:
            answer = await http.get(f"{url.rstrip('/')}/readyz")
    except httpx.HTTPError as error:
        return f"unreachable at {url}: {type(error).__name__}"
    return "ok" if answer.status_code == 200 else f"{url}/readyz answered {answer.status_code}"


async def registry_token_accepted(url: str, token: SecretStr | None, setting: str) -> str:
    """ "ok" when the registry accepts the service's own token (one authenticated call,
    /v1/whoami), else which setting is wrong: a token the registry refuses would fail every
    job the service accepts."""
    if token is None:
        return f"{setting} unset"
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"}
    try:
        async with httpx.AsyncClient(timeout=READY_TIMEOUT_S) as http:
            answer = await http.get(f"{url.rstrip('/')}/v1/whoami", headers=headers)
    except httpx.HTTPError as error:
        return f"not checked, registry unreachable: {type(error).__name__}"
    if answer.status_code in (401, 403):
        return f"the registry refuses {setting} ({answer.status_code})"
    return "ok" if answer.status_code == 200 else f"/v1/whoami answered {answer.status_code}"


async def registry_checks(url: str, token: SecretStr | None, setting: str) -> dict[str, str]:
    """The registry's readiness and the token's, asked at once."""
    ready, token_ok = await asyncio.gather(
        registry_ready(url), registry_token_accepted(url, token, setting)
    )
    return {"registry": ready, "registry_token": token_ok}


def folder_writable(folder: Path) -> str:
    """Whether a file can be made in `folder` (a few system calls: cheap enough for the loop)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"{folder} not writable: {error.strerror or error}"
    return "ok"


def tokens_admitted(tokens: Sized, setting: str) -> str:
    """ "ok" when the service admits some token; else it would refuse every caller."""
    return "ok" if len(tokens) else f"{setting} admits no token"


def readiness_answer(checks: dict[str, str], response: Response) -> Readiness:
    """The one `/readyz` body of the evaluator and the analyst: 503 + Retry-After unless every
    check is "ok"."""
    ready = all(result == "ok" for result in checks.values())
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = str(READY_RETRY_AFTER_S)
    return Readiness(ready=ready, checks=checks)


def probes_router(service: str, folder_setting: str) -> APIRouter:
    """`/healthz` and `/readyz` of the evaluator or the analyst: coroutines that wait for no
    worker thread. Readiness: the registry answers its own /readyz and accepts the service's
    registry token (one authenticated call), some token is admitted, and the folder the
    settings name `folder_setting` is writable; 503 + Retry-After otherwise. Reads
    `app.state.context.settings` and `app.state.tokens`."""
    prefix = service.upper()
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (nothing else is asked)."""
        return {"status": "ok"}

    @router.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"description": "a dependency is not ready"}},
    )
    async def readyz(request: Request, response: Response) -> Readiness:
        settings = request.app.state.context.settings
        checks = {
            **await registry_checks(
                settings.registry_url, settings.registry_token, f"{prefix}_REGISTRY_TOKEN"
            ),
            "tokens": tokens_admitted(request.app.state.tokens, f"{prefix}_TOKENS"),
            folder_setting: folder_writable(getattr(settings, folder_setting)),
        }
        return readiness_answer(checks, response)

    return router
