"""Bounded waits for what a run on a cluster needs before its first step.

On a fresh cluster every pod starts at once: the registry waits for its schema, vLLM loads its
model for minutes, and S_0 appears when the deployment's bank-s0 Job (or an operator's cold
start) has made it. A trainer that failed on the first refused connection would spend its Job's
retries on that; instead it waits, saying every 30 s what it still waits for, and fails with a
sentence naming what never came once `--wait-for-services` seconds have passed (0: no wait, as
for a run on this machine, which starts its own services).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from services.trainer.run_context import RunError
from shared.contracts.registry_api.client import NotFound, RegistryClient

SAY_EVERY_S = 30.0
POLL_S = 2.0
# each service's readiness route: the services' own, and vLLM's (which needs no API key)
READY_PATH = {"registry": "/readyz", "evaluator": "/readyz", "analyst": "/readyz"}


def readiness_url(name: str, url: str) -> str:
    """The URL that answers 200 once `name` at `url` can serve (a vLLM base URL ends in /v1)."""
    if name in READY_PATH:
        return url.rstrip("/") + READY_PATH[name]
    return url.rstrip("/").removesuffix("/v1") + "/health"


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until_ready(
    targets: dict[str, str], *, within_s: float, say: Callable[[str], object]
) -> None:
    """Return once every target (name -> base URL) answers its readiness route; RunError when
    some still does not after `within_s` seconds."""
    deadline = time.monotonic() + within_s
    pending = dict(targets)
    said_at = float("-inf")
    while True:
        pending = {n: u for n, u in pending.items() if not answers(readiness_url(n, u))}
        if not pending:
            return
        now = time.monotonic()
        names = ", ".join(f"{name} ({url})" for name, url in pending.items())
        if now >= deadline:
            raise RunError(f"not ready after {within_s:.0f} s (--wait-for-services): {names}")
        if now - said_at >= SAY_EVERY_S:
            say(f"waiting for {names} to be ready; {deadline - now:.0f} s left")
            said_at = now
        time.sleep(min(POLL_S, max(deadline - now, 0.0)))


def wait_for_alias(
    registry: RegistryClient, name: str, *, within_s: float, say: Callable[[str], object]
) -> int | None:
    """The bank id behind alias `name`, waiting up to `within_s` seconds for it to appear;
    None if it never did."""
    deadline = time.monotonic() + within_s
    said_at = float("-inf")
    while True:
        try:
            return registry.get_alias(name).bank_id
        except NotFound:
            pass
        now = time.monotonic()
        if now >= deadline:
            return None
        if now - said_at >= SAY_EVERY_S:
            say(
                f"waiting for S_0: no bank behind alias {name!r} yet (the deployment's bank-s0 "
                f"Job or an operator's cold start makes it); {deadline - now:.0f} s left"
            )
            said_at = now
        time.sleep(min(POLL_S, max(deadline - now, 0.0)))
