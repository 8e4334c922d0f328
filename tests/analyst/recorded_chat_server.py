"""A recorded-response server: a TEST DOUBLE of an OpenAI-compatible chat server.

It answers POST /v1/chat/completions over real HTTP with the next message of a script
(recorded tool calls), and keeps every request it received so a test can check what the
analyst sent (tools offered, redaction)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request


def tool_call(name: str, arguments: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """One recorded assistant message calling one tool."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"call-{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


@contextmanager
def recorded_chat_server(script: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict]]]:
    """(base URL ending in /v1, the received request bodies); past the script's end it
    answers with plain text (no tool call)."""
    received: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        received.append(body)
        index = len(received) - 1
        message = (
            script[index]
            if index < len(script)
            else {"role": "assistant", "content": "I am not sure."}
        )
        return {
            "id": f"rec-{index}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/docs", timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    try:
        yield f"{url}/v1", received
    finally:
        server.should_exit = True
        thread.join(timeout=10)
