"""The readiness checks the evaluator and the analyst share: does the registry answer its own
/readyz in time, and can the service write its folder. A probe must answer fast, and a 503
says when to ask again."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx

READY_TIMEOUT_S = 2.0  # a readiness probe must answer fast; the registry's own is one query
READY_RETRY_AFTER_S = 5


def registry_ready(url: str) -> str:
    """ "ok" when the registry's /readyz answers 200 in time, else what went wrong."""
    try:
        answer = httpx.get(f"{url.rstrip('/')}/readyz", timeout=READY_TIMEOUT_S)
    except httpx.HTTPError as error:
        return f"unreachable at {url}: {type(error).__name__}"
    return "ok" if answer.status_code == 200 else f"{url}/readyz answered {answer.status_code}"


def folder_writable(folder: Path) -> str:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"{folder} not writable: {error.strerror or error}"
    return "ok"
