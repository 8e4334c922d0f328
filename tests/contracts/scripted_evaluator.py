"""A scripted evaluator TEST DOUBLE on loopback (a real HTTP server) and a client of it with
millisecond backoff: for the evaluator client's tests and the trainer's gate tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.contracts.evaluator_api.client import EvaluatorClient

Answer = tuple[int, Any]  # status, JSON body


def job(status: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": "job-1", "kind": "gate", "status": status, "request": {"round": 0},
        "created_at": "2026-01-01T00:00:00+00:00", "started_at": None, "finished_at": None,
        "progress": {}, "result": None, "error": None, **fields,
    }  # fmt: skip


class ScriptedEvaluator:
    """A TEST DOUBLE evaluator: `script[(method, path)]` is the list of answers the route gives,
    one per request, the last for ever after; unknown routes are 404. `requests` holds
    (method, path, Idempotency-Key, JSON body) of each request in arrival order."""

    def __init__(self, script: dict[tuple[str, str], list[Answer]]) -> None:
        self.script, self.requests = script, []
        seen: dict[tuple[str, str], int] = {}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                route = (self.command, self.path)
                double.requests.append((*route, self.headers.get("Idempotency-Key"), body))
                answers = double.script.get(route, [(404, {"detail": "Not Found"})])
                seen[route] = seen.get(route, 0) + 1
                status, payload = answers[min(seen[route], len(answers)) - 1]
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = answer

            def log_message(self, *_args: object) -> None:  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serving(
    script: dict[tuple[str, str], list[Answer]], retries: int = 3
) -> Iterator[tuple[ScriptedEvaluator, EvaluatorClient]]:
    """The double on loopback and a client of it (backoff of milliseconds)."""
    double = ScriptedEvaluator(script)
    thread = threading.Thread(target=double.server.serve_forever, daemon=True)
    thread.start()
    try:
        with client(double.url, retries) as evaluator:
            yield double, evaluator
    finally:
        double.server.shutdown()
        double.server.server_close()


def client(url: str, retries: int = 3) -> EvaluatorClient:
    return EvaluatorClient(url, token="t", retries=retries, backoff=0.001, backoff_max=0.01)
