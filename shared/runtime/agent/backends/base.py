"""The one interface every policy backend implements, and a helper for token-level ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.protocols import ToolCall

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class TurnRequest:
    """One live episode's next turn."""

    key: str
    """The episode id: a backend may keep per-episode state (a KV cache) under it until release."""
    messages: tuple[dict[str, Any], ...]
    tools: list[dict[str, Any]] | None
    max_new_tokens: int
    seed: int
    """This turn's sampling seed (derived from the episode seed and the turn)."""
    prompt_ids: tuple[int, ...] | None = None
    """The exact prompt, set by the runtime for backends that expose a `renderer`."""


@dataclass(frozen=True)
class TurnOutput:
    """What the model produced for one request."""

    text: str
    """The reply the protocol reads: generated text less its stop token, or a server's content."""
    finish_reason: FinishReason
    assistant_message: dict[str, Any]
    """The message appended to the conversation for the next turn."""
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    prompt_ids: tuple[int, ...] | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    """Calls a server already parsed; None when the protocol parses `text`."""
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    """Generated tokens as a server counted them (when it sent no token ids)."""
    cached_tokens: int = 0
    """Prompt tokens whose KV state was reused rather than recomputed."""
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnFailure:
    """A technical failure for one request: the episode becomes unscored; the batch goes on."""

    error: str


class PolicyBackend(Protocol):
    """Generates one turn for many live episodes at once."""

    name: str
    model_id: str
    checkpoint_id: str
    renderer: ChatRenderer | None
    """Token-level backends set it: the runtime renders prompts with it and keeps exact tokens."""

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        """One output per request, in order; failures are returned, never raised."""
        ...

    def release(self, key: str) -> None:
        """Forget an episode's state (its KV cache)."""
        ...

    def close(self) -> None: ...


def token_level_output(
    renderer: ChatRenderer,
    prompt_ids: Sequence[int],
    generated: Sequence[int],
    logprobs: Sequence[float],
    max_new_tokens: int,
    *,
    cached_tokens: int = 0,
    timings: dict[str, float] | None = None,
) -> TurnOutput:
    """The output of a backend that generated `generated` on `prompt_ids` itself."""
    content_ids = renderer.strip_stop(generated)
    stopped = len(content_ids) < len(generated)
    text = renderer.decode(content_ids)
    return TurnOutput(
        text=text,
        finish_reason="stop" if stopped or len(generated) < max_new_tokens else "length",
        assistant_message={"role": "assistant", "content": text},
        token_ids=tuple(int(token) for token in generated),
        logprobs=tuple(float(value) for value in logprobs),
        prompt_ids=tuple(prompt_ids),
        prompt_tokens=len(prompt_ids),
        cached_tokens=cached_tokens,
        timings=timings or {},
    )
