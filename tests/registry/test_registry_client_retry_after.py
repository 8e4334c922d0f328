"""The client waits as long as a 503's Retry-After says before it retries (a real HTTP server
on loopback that answers 503 first, then 200; it notes when each request arrived)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shared.contracts.registry_api import RegistryClient, Unavailable


@contextmanager
def busy_server(answers: list[tuple[int, dict[str, str]]]) -> Iterator[tuple[str, list[float]]]:
    """A fake registry: answers each GET with the next (status, headers) of `answers`, the last
    one for ever after; yields its URL and the arrival times of the requests."""
    arrivals: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrivals.append(time.monotonic())
            status, headers = answers[min(len(arrivals), len(answers)) - 1]
            body = json.dumps({"detail": "busy"} if status >= 500 else {"ok": True}).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", arrivals
    finally:
        server.shutdown()
        server.server_close()


def _client(url: str, retries: int = 2) -> RegistryClient:
    # Backoff alone would wait at most a few milliseconds: any longer wait is Retry-After's.
    return RegistryClient(url, "token", retries=retries, backoff=0.001, backoff_max=5.0)


def test_retry_after_seconds_are_waited() -> None:
    answers = [(503, {"Retry-After": "1"}), (200, {})]
    with busy_server(answers) as (url, arrivals), _client(url) as client:
        assert client.request("GET", "/v1/banks").json() == {"ok": True}
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 0.95


def test_without_retry_after_the_backoff_is_short() -> None:
    with busy_server([(503, {}), (200, {})]) as (url, arrivals), _client(url) as client:
        client.request("GET", "/v1/banks")
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] < 0.5


def test_a_registry_that_stays_busy_raises_unavailable() -> None:
    with (
        busy_server([(503, {"Retry-After": "0"})]) as (url, arrivals),
        _client(url, retries=2) as client,
        pytest.raises(Unavailable),
    ):
        client.request("GET", "/v1/banks")
    assert len(arrivals) == 3  # the first try and two retries
