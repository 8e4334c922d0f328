"""OpenAI-compatible HTTP backend (`vllm serve`, SGLang, a hosted model) over httpx.

Requests of one round run in parallel up to a concurrency limit; transport errors, timeouts, 429
and 5xx answers are retried with exponential backoff; anything still failing becomes a
`TurnFailure`, which makes that episode unscored and leaves the others running.

Exact tokens: vLLM returns `prompt_token_ids` and per-choice `token_ids` when asked
(`return_token_ids`), and log-probs with `logprobs: true`. When a server gives all three, the
trajectory is exact-token and trainable; otherwise it is still scored (evaluation) but carries no
segments. The server renders the chat itself, so the prompt's token ids are whatever its template
produced; a drift from the previous turn's tokens forks a segment as with in-process backends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from shared.agent.backends.base import TurnFailure, TurnOutput, TurnRequest
from shared.agent.decoding import DecodingConfig
from shared.agent.protocols import ToolCall, coerce_arguments

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """Chat completions against `base_url` (for example `http://localhost:8000/v1`)."""

    name = "openai"
    renderer = None  # the server renders prompts

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        checkpoint_id: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        vllm_extensions: bool = True,
        client: httpx.Client | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.model_id = model
        self.checkpoint_id = checkpoint_id or model
        self.concurrency, self.retries, self.backoff_s = concurrency, retries, backoff_s
        # vLLM/SGLang accept top_k, return_token_ids and chat_template_kwargs; the OpenAI API
        # rejects unknown fields, so a hosted model needs vllm_extensions=False.
        self.vllm_extensions = vllm_extensions
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    def release(self, key: str) -> None:
        pass  # the server's prefix cache manages itself

    def close(self) -> None:
        self.client.close()

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        if len(requests) == 1:
            return [self._one(requests[0], decoding)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(lambda request: self._one(request, decoding), requests))

    def body(self, request: TurnRequest, decoding: DecodingConfig) -> dict[str, Any]:
        """The JSON body of one chat completion request."""
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": list(request.messages),
            "max_tokens": request.max_new_tokens,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "logprobs": True,
            "n": 1,
        }
        if request.tools:
            body["tools"] = request.tools
            body["tool_choice"] = "auto"
        if decoding.seed is not None:
            body["seed"] = request.seed
        if self.vllm_extensions:
            body["top_k"] = decoding.top_k
            body["return_token_ids"] = True
            body["chat_template_kwargs"] = {"enable_thinking": decoding.thinking}
        return body

    def _one(self, request: TurnRequest, decoding: DecodingConfig) -> TurnOutput | TurnFailure:
        body = self.body(request, decoding)
        started = time.perf_counter()
        error = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self.client.post("/chat/completions", json=body)
            except httpx.HTTPError as failure:  # connection refused, reset, timeout
                error = f"{type(failure).__name__}: {failure}"
                continue
            if response.status_code in RETRY_STATUS:
                error = f"HTTP {response.status_code}: {response.text[:300]}"
                continue
            if response.status_code != 200:
                return TurnFailure(f"HTTP {response.status_code}: {response.text[:300]}")
            try:
                return parse_completion(response.json(), started)
            except (ValueError, KeyError, IndexError, TypeError) as failure:
                return TurnFailure(f"malformed completion: {type(failure).__name__}: {failure}")
        return TurnFailure(f"gave up after {self.retries + 1} attempts: {error}")


def parse_completion(data: dict[str, Any], started: float | None = None) -> TurnOutput:
    """A chat completion response as a turn output (exact tokens when the server sent them)."""
    choice = data["choices"][0]
    message = choice["message"]
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    raw_calls = message.get("tool_calls") or []
    calls = tuple(
        ToolCall(
            call["function"]["name"],
            coerce_arguments(call["function"].get("arguments")),
            raw=json.dumps(call["function"], ensure_ascii=False),
            call_id=call.get("id"),
        )
        for call in raw_calls
    )
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if raw_calls:
        assistant["tool_calls"] = [
            {"id": call.get("id"), "type": "function", "function": call["function"]}
            for call in raw_calls
        ]
    token_ids = choice.get("token_ids")
    prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
    entries = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(entry["logprob"]) for entry in entries]
    exact = token_ids is not None and prompt_ids is not None and len(logprobs) == len(token_ids)
    usage = data.get("usage") or {}
    return TurnOutput(
        text=content,
        finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        assistant_message=assistant,
        token_ids=tuple(token_ids) if exact else None,
        logprobs=tuple(logprobs) if exact else None,
        prompt_ids=tuple(prompt_ids) if exact else None,
        tool_calls=calls or None,
        reasoning=reasoning,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cached_tokens=int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0),
        timings={"request_s": time.perf_counter() - started} if started is not None else {},
    )
