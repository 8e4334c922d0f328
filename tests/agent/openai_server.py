"""Test double: a fake OpenAI-compatible (vLLM-flavoured) chat server over the tiny transformers
model, run in-process by tests.

It exercises the real `OpenAIBackend` client end to end (HTTP, JSON, tool calls, token ids,
log-probs, `/v1/models`, `/tokenize`, `top_logprobs`) and can misbehave on purpose: answer 503 a
few times, be slow, reject requests, refuse tools, or return untempered log-probs as vLLM does by
default (`raw_logprobs`). The real server is tested in tests/agent/test_vllm_server.py.
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

from shared.runtime.agent.backends.base import TurnRequest
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.protocols import _parse_tool_call_text


class Behaviour:
    def __init__(self) -> None:
        self.fail_first = 0
        self.fail_status = 503
        self.delay_s = 0.0
        self.drop_token_ids = False
        self.logprobs_mode = "processed_logprobs"  # or "raw_logprobs", vLLM's default
        self.tool_choice_enabled = True  # False: as vLLM without --enable-auto-tool-choice
        self.prompt_tokens_details = True  # False: as vLLM without --enable-prompt-tokens-details
        self.served_names = ["tiny"]
        self.template_drops_tools = False  # as SmolLM2's chat template
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []


def make_app(backend: Any, behaviour: Behaviour) -> FastAPI:
    app = FastAPI()
    counter_lock, model_lock = threading.Lock(), threading.Lock()
    renderer = backend.renderer

    def log_softmax(ids: list[int], temperature: float) -> Any:
        """Log-probs of the next token after every position of `ids` (float64)."""
        import torch

        with model_lock, torch.no_grad():
            logits = backend.model(input_ids=torch.tensor([ids])).logits[0].double()
        return torch.log_softmax(logits / temperature, dim=-1)

    @app.get("/v1/models")
    def models() -> Any:
        return {"object": "list", "data": [{"id": name} for name in behaviour.served_names]}

    @app.post("/tokenize")
    def tokenize(body: dict[str, Any]) -> Any:
        tools = None if behaviour.template_drops_tools else body.get("tools")
        ids = renderer.prompt(body["messages"], tools, None).ids
        return {"count": len(ids), "tokens": list(ids), "max_model_len": 4096}

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
            if body.get("tools") and not behaviour.tool_choice_enabled:
                message = (
                    '"auto" tool choice requires --enable-auto-tool-choice and '
                    "--tool-call-parser to be set"
                )
                return JSONResponse({"error": {"message": message}}, status_code=400)
            decoding = DecodingConfig(
                temperature=body["temperature"],
                top_p=body["top_p"],
                top_k=body.get("top_k", -1),
                max_new_tokens=body["max_tokens"],
                seed=body.get("seed"),
            )
            prompt = renderer.prompt(body["messages"], body.get("tools"), None)
            key = uuid.uuid4().hex
            request = TurnRequest(
                key, (), None, body["max_tokens"], body.get("seed", 0), prompt.ids
            )
            with model_lock:
                [output] = backend.generate([request], decoding)
                backend.release(key)
            logprobs = list(output.logprobs)
            raw = behaviour.logprobs_mode == "raw_logprobs"
            top = int(body.get("top_logprobs") or 0)
            if raw or top:
                # Raw mode reports the untempered distribution; top_logprobs come from the same
                # mode's distribution at the first generated position.
                scale = 1.0 if raw else (body["temperature"] or 1.0)
                table = log_softmax(list(prompt.ids) + list(output.token_ids), scale)
                start = len(prompt.ids) - 1
                if raw:
                    logprobs = [
                        float(table[start + i, token]) for i, token in enumerate(output.token_ids)
                    ]
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
                        for t, lp in zip(output.token_ids, logprobs, strict=True)
                    ]
                },
            }
            if top:
                values, ids = table[start].topk(top)
                choice["logprobs"]["content"][0]["top_logprobs"] = [
                    {"token": str(int(i)), "logprob": float(v)}
                    for v, i in zip(values, ids, strict=True)
                ]
            data: dict[str, Any] = {
                "id": "cmpl-" + key,
                "object": "chat.completion",
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt.ids),
                    "completion_tokens": len(output.token_ids),
                },
            }
            if behaviour.prompt_tokens_details:
                data["usage"]["prompt_tokens_details"] = {"cached_tokens": 0}
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
