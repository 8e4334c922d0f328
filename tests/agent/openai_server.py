"""A small OpenAI-compatible chat server over the tiny transformers model, run in-process by tests.

It exercises the real `OpenAIBackend` client end to end (HTTP, JSON, tool calls, token ids,
log-probs) and can misbehave on purpose: answer 503 a few times, be slow, or reject requests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from shared.agent.backends.base import TurnRequest
from shared.agent.decoding import DecodingConfig
from shared.agent.protocols import _parse_tool_call_text


class Behaviour:
    def __init__(self) -> None:
        self.fail_first = 0
        self.fail_status = 503
        self.delay_s = 0.0
        self.drop_token_ids = False
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []


def make_app(backend: Any, behaviour: Behaviour) -> FastAPI:
    app = FastAPI()
    counter_lock, model_lock = threading.Lock(), threading.Lock()

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, Any]) -> Any:
        with counter_lock:
            behaviour.calls += 1
            call = behaviour.calls
            behaviour.bodies.append(body)
            behaviour.in_flight += 1
            behaviour.max_in_flight = max(behaviour.max_in_flight, behaviour.in_flight)
        try:
            if behaviour.delay_s:
                time.sleep(behaviour.delay_s)
            if call <= behaviour.fail_first:
                return JSONResponse(
                    {"error": "scripted failure"}, status_code=behaviour.fail_status
                )
            decoding = DecodingConfig(
                temperature=body["temperature"],
                top_p=body["top_p"],
                top_k=body.get("top_k", -1),
                max_new_tokens=body["max_tokens"],
                seed=body.get("seed"),
            )
            renderer = backend.renderer
            prompt = renderer.prompt(body["messages"], body.get("tools"), None)
            key = uuid.uuid4().hex
            request = TurnRequest(
                key, (), None, body["max_tokens"], body.get("seed", 0), prompt.ids
            )
            with model_lock:
                [output] = backend.generate([request], decoding)
                backend.release(key)
            message: dict[str, Any] = {"role": "assistant", "content": output.text}
            if body.get("tools"):
                calls, content, broken = _parse_tool_call_text(output.text)
                if calls and not broken:
                    message["content"] = content or None
                    message["tool_calls"] = [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for i, c in enumerate(calls)
                    ]
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "finish_reason": output.finish_reason,
                "logprobs": {
                    "content": [
                        {"token": str(t), "logprob": lp}
                        for t, lp in zip(output.token_ids, output.logprobs, strict=True)
                    ]
                },
            }
            data: dict[str, Any] = {
                "id": "cmpl-" + key,
                "object": "chat.completion",
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt.ids),
                    "completion_tokens": len(output.token_ids),
                },
            }
            if not behaviour.drop_token_ids:
                choice["token_ids"] = list(output.token_ids)
                data["prompt_token_ids"] = list(prompt.ids)
            return data
        finally:
            with counter_lock:
                behaviour.in_flight -= 1

    return app


class ServerThread:
    """uvicorn on a free local port in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
