"""The trainer's bounded waits (issue 30): on a cluster every pod starts at once, so the trainer
waits for its services, the rollout servers and S_0 instead of spending its Job's retries, says
what it waits for, and fails with a sentence naming what never came."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from services.trainer import service_wait
from services.trainer.run_context import RunError
from services.trainer.service_wait import readiness_url, wait_for_alias, wait_until_ready
from shared.contracts.registry_api.client import NotFound


def server_ready_after(seconds: float) -> tuple[ThreadingHTTPServer, str]:
    """A loopback server whose /readyz and /health answer 503 until `seconds` have passed."""
    ready_at = time.monotonic() + seconds

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if time.monotonic() >= ready_at else 503)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch) -> None:
    monkeypatch.setattr(service_wait, "POLL_S", 0.1)
    monkeypatch.setattr(service_wait, "SAY_EVERY_S", 0.0)


def test_readiness_routes_are_the_services_and_vllms_own() -> None:
    assert readiness_url("registry", "http://registry:8000") == "http://registry:8000/readyz"
    assert readiness_url("vllm 0", "http://vllm-rollout-0.x:8000/v1") == (
        "http://vllm-rollout-0.x:8000/health"
    )


def test_it_waits_for_a_late_server_and_says_so() -> None:
    server, url = server_ready_after(1.0)
    said: list[str] = []
    try:
        began = time.monotonic()
        wait_until_ready({"registry": url}, within_s=30, say=said.append)
        assert time.monotonic() - began >= 1.0
    finally:
        server.shutdown()
    assert said and f"registry ({url})" in said[0] and "s left" in said[0]


def test_a_server_that_never_comes_fails_with_its_name_once_the_bound_passes() -> None:
    server, url = server_ready_after(3600)
    try:
        began = time.monotonic()
        with pytest.raises(RunError, match=r"not ready after 1 s .*evaluator \(http"):
            wait_until_ready({"evaluator": url}, within_s=1, say=lambda _: None)
        assert time.monotonic() - began < 10
    finally:
        server.shutdown()


class RegistryWhoseAliasAppearsLater:
    """TEST DOUBLE of the registry client: `get_alias` is NotFound for its first calls."""

    def __init__(self, misses: int) -> None:
        self.misses = misses

    def get_alias(self, name: str):
        if self.misses > 0:
            self.misses -= 1
            raise NotFound(404, "no such alias", "GET", f"/v1/aliases/{name}")
        return SimpleNamespace(bank_id=7)


def test_s0_is_waited_for_until_the_alias_appears() -> None:
    said: list[str] = []
    registry = RegistryWhoseAliasAppearsLater(misses=3)
    assert wait_for_alias(registry, "current", within_s=30, say=said.append) == 7
    assert said and "waiting for S_0" in said[0] and "'current'" in said[0]


def test_without_s0_the_wait_ends_with_none_after_the_bound() -> None:
    registry = RegistryWhoseAliasAppearsLater(misses=10**6)
    assert wait_for_alias(registry, "current", within_s=0.5, say=lambda _: None) is None
