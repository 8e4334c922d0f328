"""Chat rendering for token-level backends: messages -> prompt token ids, without drifting tokens.

Each turn the conversation is rendered with the model's chat template (tools included, so a
changing click enum is visible to the model). When the new rendering starts with the exact text of
the episode's previous context (last prompt plus the tokens the model generated), the new prompt
is the previous token ids plus the tokenized remainder: the generated tokens are kept as sampled,
never re-tokenized. When it does not (a template that rewrites earlier turns: changed tool schemas
in the system prompt, reasoning dropped from history), the whole rendering is tokenized afresh and
the trajectory starts a new token-contiguous segment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenContext:
    """An episode's context so far, as token ids and the exact text they stand for."""

    ids: tuple[int, ...]
    text: str


class ChatRenderer:
    """A tokenizer's chat template, used the same way by every token-level backend."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        template_kwargs: dict[str, Any] | None = None,
        stop_token_ids: Iterable[int] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        template = tokenizer.chat_template or ""
        if not template:
            raise ValueError("the tokenizer has no chat template")
        self.supports_tools = "tools" in template
        # A turn ends at the tokenizer's eos, the model's generation eos ids or ChatML's <|im_end|>
        stops = set(stop_token_ids)
        if tokenizer.eos_token_id is not None:
            stops.add(tokenizer.eos_token_id)
        if "<|im_end|>" in tokenizer.get_vocab():
            stops.add(tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.stop_token_ids = frozenset(stops)

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        **template_kwargs: Any,
    ) -> str:
        """The template's text for the conversation, ending with the assistant generation prompt."""
        if tools and not self.supports_tools:
            raise ValueError(
                "this model's chat template does not render tools; use the text protocol"
            )
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=tools or None,
            tokenize=False,
            add_generation_prompt=True,
            **{**self.template_kwargs, **template_kwargs},
        )

    def encode(self, text: str) -> list[int]:
        # The template already wrote every special token; the tokenizer must add none.
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def prompt(
        self,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        previous: TokenContext | None,
        **template_kwargs: Any,
    ) -> TokenContext:
        """This turn's prompt, extending `previous` token for token when the rendering allows."""
        text = self.render(messages, tools, **template_kwargs)
        if previous is not None and previous.ids and text.startswith(previous.text):
            return TokenContext(previous.ids + tuple(self.encode(text[len(previous.text) :])), text)
        return TokenContext(tuple(self.encode(text)), text)

    def extend(self, prompt: TokenContext, generated: Sequence[int]) -> TokenContext:
        """The context after the model generated `generated` on `prompt`."""
        return TokenContext(prompt.ids + tuple(generated), prompt.text + self.decode(generated))

    def strip_stop(self, generated: Sequence[int]) -> list[int]:
        """Generated ids without a final stop token (the assistant message's content)."""
        ids = list(generated)
        if ids and ids[-1] in self.stop_token_ids:
            ids.pop()
        return ids
