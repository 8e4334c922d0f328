"""OpenAI-compatible HTTP backend (`vllm serve`, SGLang, a hosted model) over httpx.

Requests of one round run in parallel up to a concurrency limit; transport errors, timeouts, 429
and 5xx answers are retried with exponential backoff; anything still failing becomes a
`TurnFailure`, which makes that episode unscored and leaves the others running.

Exact tokens: vLLM returns `prompt_token_ids` and per-choice `token_ids` when asked
(`return_token_ids`), and log-probs with `logprobs: true`. When a server gives all three and its
log-probs were verified to be the sampling distribution's, the trajectory is exact-token and
trainable; otherwise it is still scored (evaluation) but carries no segments. The server renders
the chat itself, so the prompt's token ids are whatever its template produced; a drift from the
previous turn's tokens forks a segment as with in-process backends.

`prepare` (called once by the rollout engine before any episode) checks the server against what
the run relies on, so a misconfigured server fails the run once with the reason instead of every
episode: the served model name; the served weights' identity (`checkpoint_id`: passed in, or
published by `intraskill agent serve` as a served name `checkpoint:<id>`; never guessed); tool
calls for the tools layouts; and, with vLLM, that log-probs are taken after temperature
(`--logprobs-mode processed_logprobs`), by a probe that recomputes the tempered distribution from
the same server's untempered one. Prompts are counted with vLLM's `/tokenize` so `context_cap`
holds exactly as with the in-process backends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx

from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.protocols import ToolCall, coerce_arguments

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
CHECKPOINT_NAME_PREFIX = "checkpoint:"
"""A served model name `checkpoint:<id>` publishes the served weights' identity."""
PROBE_TOP_LOGPROBS = 8
PROBE_MIN_GAP = 0.05
"""The probe needs some log-prob gap to tell tempered from untempered numbers apart."""
PROBE_TOLERANCE = 2e-3
PROBE_MESSAGES = ({"role": "user", "content": "Name one colour."},)
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "A tool the start-up check offers to see that the server accepts tools.",
        "parameters": {"type": "object", "properties": {"value": {"type": "string"}}},
    },
}

InexactPolicy = Literal["refuse", "mark"]


class ServerCheckError(RuntimeError):
    """The server cannot give what this run relies on; raised once, before any episode."""


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
        untempered_logprobs: InexactPolicy = "refuse",
        client: httpx.Client | None = None,
    ) -> None:
        """`untempered_logprobs`: what to do when the server's log-probs are not the sampling
        distribution's: "refuse" the run, or "mark" its episodes inexact (evaluation only)."""
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if untempered_logprobs not in ("refuse", "mark"):
            raise ValueError("untempered_logprobs must be 'refuse' or 'mark'")
        self.model_id = model
        # None until `prepare` reads the identity the server publishes; never the served name.
        self.checkpoint_id: str | None = checkpoint_id
        self.concurrency, self.retries, self.backoff_s = concurrency, retries, backoff_s
        # vLLM/SGLang accept top_k, return_token_ids and chat_template_kwargs; the OpenAI API
        # rejects unknown fields, so a hosted model needs vllm_extensions=False.
        self.vllm_extensions = vllm_extensions
        self.untempered_logprobs = untempered_logprobs
        self.root_url = base_url.rstrip("/").removesuffix("/v1")  # vLLM's /tokenize, /health
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self.logprobs_exact = True
        """False once the probe found (and policy "mark" accepted) untempered log-probs."""
        self.reports_cached_tokens: bool | None = None
        self._checked: set[tuple[Any, ...]] = set()

    def release(self, key: str) -> None:
        pass  # the server's prefix cache manages itself

    def close(self) -> None:
        self.client.close()

    # -- start-up checks ---------------------------------------------------------------------

    def prepare(self, protocol: str, decoding: DecodingConfig) -> None:
        """Check once per setting that the server serves this run as it will be recorded."""
        key = (protocol, decoding.temperature, decoding.top_k, decoding.top_p, decoding.thinking)
        if key in self._checked:
            return
        self._check_model()
        if protocol == "tools":
            self._check_tools(decoding)
        if self.vllm_extensions:  # only vLLM-style servers return token ids to train on
            self._check_logprobs(decoding)
        self._checked.add(key)

    def _check_model(self) -> None:
        names = [card["id"] for card in self._request("GET", "/models").json().get("data", [])]
        if self.model_id not in names:
            raise ServerCheckError(f"the server serves {names}, not {self.model_id!r}")
        published = [
            name.removeprefix(CHECKPOINT_NAME_PREFIX)
            for name in names
            if name.startswith(CHECKPOINT_NAME_PREFIX)
        ]
        if self.checkpoint_id is None:
            if len(published) != 1:
                raise ServerCheckError(
                    "unknown identity of the served weights: pass checkpoint_id (the trainer's "
                    "weight version), or serve with `intraskill agent serve`, which publishes it"
                )
            self.checkpoint_id = published[0]
        elif published and self.checkpoint_id not in published:
            raise ServerCheckError(
                f"the server serves checkpoint {published}, not {self.checkpoint_id!r}"
            )

    def _check_tools(self, decoding: DecodingConfig) -> None:
        messages = list(PROBE_MESSAGES)
        if self.vllm_extensions:
            with_tools = self.count_prompt(messages, [PROBE_TOOL], decoding)
            if with_tools == self.count_prompt(messages, None, decoding):
                raise ServerCheckError(
                    f"{self.model_id}'s chat template renders no tools; the tools layouts need "
                    "them (use a text layout)"
                )
        body = {
            **self._probe_body(decoding.temperature, decoding),
            "tools": [PROBE_TOOL],
            "tool_choice": "auto",
        }
        response = self._request("POST", "/chat/completions", body, accept={400})
        if response.status_code == 400:
            raise ServerCheckError(
                f"the server refuses tool calls ({response.text[:300]}); start it with "
                "--enable-auto-tool-choice --tool-call-parser NAME (intraskill agent serve does)"
            )

    def _check_logprobs(self, decoding: DecodingConfig) -> None:
        """Log-probs must be log_softmax(logits / T): compare the server's answer at T with its
        answer at T = 1 rescaled, on the same prompt's first token (gaps between the top tokens
        shrink by 1/T under temperature; untempered ones do not move)."""
        tempered = self._probe(decoding.temperature, decoding)
        self.reports_cached_tokens = "prompt_tokens_details" in (tempered.get("usage") or {})
        if not self.reports_cached_tokens:
            log.warning(
                "the server does not report cached prompt tokens; start it with "
                "--enable-prompt-tokens-details to see prefix-cache hits"
            )
        if decoding.temperature in (0.0, 1.0):
            return  # greedy, or T = 1: tempered and untempered log-probs agree
        verdict = logprob_mode(
            _top_logprobs(self._probe(1.0, decoding)), _top_logprobs(tempered),
            decoding.temperature,
        )  # fmt: skip
        if verdict == "processed":
            return
        problem = (
            "the server's log-probs are not the sampling distribution's at T = "
            f"{decoding.temperature} ({verdict}); start vLLM with --logprobs-mode "
            "processed_logprobs (intraskill agent serve does)"
        )
        if self.untempered_logprobs == "refuse":
            raise ServerCheckError(problem)
        log.warning("%s; episodes are recorded without exact tokens", problem)
        self.logprobs_exact = False

    def _probe_body(self, temperature: float, decoding: DecodingConfig) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": list(PROBE_MESSAGES),
            "max_tokens": 1,
            "temperature": temperature,
            "top_p": 1.0,
            "seed": 0,
        }
        if self.vllm_extensions:
            body["top_k"] = -1
            body["chat_template_kwargs"] = {"enable_thinking": decoding.thinking}
        return body

    def _probe(self, temperature: float, decoding: DecodingConfig) -> dict[str, Any]:
        body = {
            **self._probe_body(temperature, decoding),
            "logprobs": True,
            "top_logprobs": PROBE_TOP_LOGPROBS,
            "return_tokens_as_token_ids": True,  # two ids may decode to one string
        }
        return self._request("POST", "/chat/completions", body).json()

    def count_prompt(
        self,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        decoding: DecodingConfig,
    ) -> int | None:
        """The prompt's token count as the server renders it (vLLM's /tokenize), else None."""
        if not self.vllm_extensions:
            return None
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": list(messages),
            "add_generation_prompt": True,
            "chat_template_kwargs": {"enable_thinking": decoding.thinking},
        }
        if tools:
            body["tools"] = tools
        return int(self._request("POST", f"{self.root_url}/tokenize", body).json()["count"])

    def _request(
        self, method: str, url: str, body: Any = None, accept: set[int] = frozenset()
    ) -> httpx.Response:
        """One call with the backend's retries; raises ServerCheckError when it still fails."""
        outcome = self._send(method, url, body)
        if isinstance(outcome, str):
            raise ServerCheckError(f"{method} {url}: {outcome}")
        if outcome.status_code != 200 and outcome.status_code not in accept:
            raise ServerCheckError(
                f"{method} {url}: HTTP {outcome.status_code}: {outcome.text[:300]}"
            )
        return outcome

    def _send(self, method: str, url: str, body: Any = None) -> httpx.Response | str:
        """The first answer that is not retryable, or the last error as text."""
        error = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self.client.request(method, url, json=body)
            except httpx.HTTPError as failure:  # connection refused, reset, timeout
                error = f"{type(failure).__name__}: {failure}"
                continue
            if response.status_code in RETRY_STATUS:
                error = f"HTTP {response.status_code}: {response.text[:300]}"
                continue
            return response
        return f"gave up after {self.retries + 1} attempts: {error}"

    # -- generation --------------------------------------------------------------------------

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
        started = time.perf_counter()
        outcome = self._send("POST", "/chat/completions", self.body(request, decoding))
        if isinstance(outcome, str):
            return TurnFailure(outcome)
        if outcome.status_code != 200:
            return TurnFailure(f"HTTP {outcome.status_code}: {outcome.text[:300]}")
        try:
            return parse_completion(outcome.json(), started, exact_logprobs=self.logprobs_exact)
        except (ValueError, KeyError, IndexError, TypeError) as failure:
            return TurnFailure(f"malformed completion: {type(failure).__name__}: {failure}")


def _top_logprobs(completion: dict[str, Any]) -> dict[str, float]:
    """The first generated position's top log-probs by token. vLLM lists the sampled token first
    (even outside the top k), so the lists of two probes align by token, not by rank."""
    first = completion["choices"][0]["logprobs"]["content"][0]
    return {entry["token"]: float(entry["logprob"]) for entry in first["top_logprobs"]}


def logprob_mode(at_one: dict[str, float], at_t: dict[str, float], temperature: float) -> str:
    """'processed' when the log-probs at `temperature` are log_softmax(logits / T) given the same
    server's log-probs at T = 1, 'untempered' when they did not move, else 'unverifiable'.

    Log-prob gaps between two tokens are logit gaps over T, whatever the normaliser, so the
    gaps at T between tokens listed by both probes must be those at 1 divided by T."""
    common = sorted(set(at_one) & set(at_t), key=lambda token: -at_one[token])
    gaps_one = [at_one[common[0]] - at_one[token] for token in common[1:]]
    gaps_t = [at_t[common[0]] - at_t[token] for token in common[1:]]
    if not gaps_one or max(gaps_one) < PROBE_MIN_GAP:
        return "unverifiable"

    def fits(scale: float) -> bool:
        return all(
            abs(gap_t - gap * scale) <= PROBE_TOLERANCE * (1 + gap * scale)
            for gap, gap_t in zip(gaps_one, gaps_t, strict=True)
        )

    if fits(1 / temperature):
        return "processed"
    return "untempered" if fits(1.0) else "unverifiable"


def parse_completion(
    data: dict[str, Any], started: float | None = None, *, exact_logprobs: bool = True
) -> TurnOutput:
    """A chat completion response as a turn output (exact tokens when the server sent them and
    its log-probs are the sampling distribution's)."""
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
    exact = (
        exact_logprobs
        and token_ids is not None
        and prompt_ids is not None
        and len(logprobs) == len(token_ids)
    )
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
