"""Action protocols: how a model's reply becomes one environment action, or a protocol error.

Two protocols share one validation rule set:

* **tools** (function tools, for models with tool-call chat templates such as Qwen3): the tools are
  rebuilt every turn from the page state, `search(query)` only while search is available and
  `click(value)` with an enum of the page's clickables. Calls arrive either as text the model
  generated (Hermes `<tool_call>{json}</tool_call>` or Qwen3-Coder `<function=...>` XML) or already
  parsed by an OpenAI-compatible server.
* **text** (`search[...]`, `click[...]`, for small models without tool templates). Free text around
  the single action is allowed (it plays the role of reasoning).

Anything but exactly one valid call is a protocol error with a reason code
(tool_call_count, mixed_content, invalid_tool_call, unavailable_tool, invalid_tool_arguments); the
runtime answers it with JSON feedback and counts the turn as a step without touching the
environment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.runtime.shopsim.types import PublicState

ProtocolErrorCode = Literal[
    "tool_call_count",
    "mixed_content",
    "invalid_tool_call",
    "unavailable_tool",
    "invalid_tool_arguments",
]

TOOLS_PROTOCOL_VERSION = "function-tools-repair-v1"
TEXT_PROTOCOL_VERSION = "text-actions-v1"

_THINK_CLOSE = "</think>"
_THINK_OPEN = "<think>"


@dataclass(frozen=True)
class ToolCall:
    """One attempted call: its tool name and arguments (None when they did not parse)."""

    name: str
    arguments: dict[str, Any] | None
    raw: str = ""
    call_id: str | None = None


@dataclass(frozen=True)
class Reply:
    """What a backend returned for one turn, before the protocol reads it.

    `tool_calls` is None when calls must be parsed from `text` (in-process backends); an
    OpenAI-compatible server that parsed them itself fills it (possibly empty).
    """

    text: str
    tool_calls: tuple[ToolCall, ...] | None = None
    reasoning: str | None = None


@dataclass(frozen=True)
class ProtocolError:
    code: ProtocolErrorCode
    message: str

    def feedback(self) -> str:
        """The JSON the model reads back; one line, stable key order."""
        return json.dumps(
            {"type": "tool_protocol_error", "code": self.code, "message": self.message},
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class ParsedReply:
    """A reply read by a protocol: either one environment action or one protocol error."""

    action: str | None
    error: ProtocolError | None
    calls: tuple[ToolCall, ...] = ()
    reasoning: str = ""
    content: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.action is None) == (self.error is None):
            raise ValueError("a parsed reply has exactly one of action and error")


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, rest): text up to `</think>` is reasoning; an unclosed `<think>` is all of it."""
    if _THINK_CLOSE in text:
        reasoning, rest = text.split(_THINK_CLOSE, 1)
        return reasoning.replace(_THINK_OPEN, "", 1).strip(), rest
    stripped = text.lstrip()
    if stripped.startswith(_THINK_OPEN):
        return stripped[len(_THINK_OPEN) :].strip(), ""
    return "", text


def validate_call(
    name: str, arguments: dict[str, Any] | None, state: PublicState
) -> tuple[str | None, ProtocolError | None]:
    """The environment action of a call, or the protocol error that rejects it."""
    if name not in ("search", "click"):
        return None, ProtocolError(
            "invalid_tool_call", f"unknown tool {name!r}; the tools are search and click"
        )
    if name == "search" and not state.search_available:
        return None, ProtocolError(
            "unavailable_tool", "search is only available on the home page; use click"
        )
    if arguments is None:
        return None, ProtocolError(
            "invalid_tool_call", f"the arguments of {name} are not a JSON object"
        )
    key = "query" if name == "search" else "value"
    if set(arguments) != {key}:
        return None, ProtocolError(
            "invalid_tool_arguments", f"{name} takes exactly one argument, {key!r}"
        )
    value = arguments[key]
    if not isinstance(value, str) or not value.strip():
        return None, ProtocolError("invalid_tool_arguments", f"{key!r} must be a non-empty string")
    if name == "search":
        return f"search[{value.strip()}]", None
    clickable = match_clickable(value, state.clickables)
    if clickable is None:
        return None, ProtocolError(
            "invalid_tool_arguments",
            f"{value!r} is not clickable on this page; choose one of the listed values",
        )
    return f"click[{clickable}]", None


def match_clickable(value: str, clickables: Sequence[str]) -> str | None:
    """The clickable a value names: exact, else the unique case- and space-insensitive match."""
    if value in clickables:
        return value
    folded = value.strip().casefold()
    matches = [item for item in clickables if item.strip().casefold() == folded]
    return matches[0] if len(matches) == 1 else None


class ToolsProtocol:
    """Function tools, one call per turn (the reference's `openai-function-tools-repair-v3`)."""

    name: Literal["tools"] = "tools"
    version = TOOLS_PROTOCOL_VERSION

    def __init__(self, language: Literal["zh", "en"] = "en") -> None:
        self.language = language

    def tools(self, state: PublicState) -> list[dict[str, Any]]:
        """OpenAI tool schemas for this page: search only while available, click with an enum."""
        zh = self.language == "zh"
        tools = []
        if state.search_available:
            tools.append(
                _function(
                    "search",
                    "在商品目录中搜索（仅首页可用）。"
                    if zh
                    else "Search the catalog (home page only).",
                    {
                        "query": {
                            "type": "string",
                            "description": "搜索词" if zh else "search words",
                        }
                    },
                )
            )
        tools.append(
            _function(
                "click",
                "点击当前页面上的一个可点击项。"
                if zh
                else "Click one clickable item of the current page.",
                {"value": {"type": "string", "enum": list(state.clickables)}},
            )
        )
        return tools

    def parse(self, reply: Reply, state: PublicState) -> ParsedReply:
        if reply.tool_calls is None:
            reasoning, rest = split_reasoning(reply.text)
            calls, content, broken = _parse_tool_call_text(rest)
        else:
            reasoning, content, calls, broken = (
                reply.reasoning or "",
                reply.text.strip(),
                reply.tool_calls,
                False,
            )
            if not reasoning:
                reasoning, rest = split_reasoning(reply.text)
                content = rest.strip()

        def error(code: ProtocolErrorCode, message: str) -> ParsedReply:
            return ParsedReply(None, ProtocolError(code, message), calls, reasoning, content)

        if broken:
            return error("invalid_tool_call", "a <tool_call> block is not closed or not valid")
        if len(calls) != 1:
            return error("tool_call_count", f"call exactly one tool per turn; got {len(calls)}")
        if content:
            return error(
                "mixed_content", "write nothing outside the tool call (reason in thinking)"
            )
        call = calls[0]
        action, problem = validate_call(call.name, call.arguments, state)
        if problem is not None:
            return error(problem.code, problem.message)
        return ParsedReply(action, None, calls, reasoning, content)

    def feedback_messages(self, parsed: ParsedReply, text: str) -> list[dict[str, Any]]:
        """Tool results answer the calls (one per call id when the server gave ids)."""
        ids = [call.call_id for call in parsed.calls if call.call_id]
        if ids:
            return [{"role": "tool", "tool_call_id": call_id, "content": text} for call_id in ids]
        role = "tool" if parsed.calls else "user"
        return [{"role": role, "content": text}]


class TextProtocol:
    """`search[query]` / `click[value]` written in the reply; exactly one per turn."""

    name: Literal["text"] = "text"
    version = TEXT_PROTOCOL_VERSION
    _ACTION = re.compile(r"\b(search|click)\s*\[", re.IGNORECASE)

    def tools(self, state: PublicState) -> None:
        return None

    def parse(self, reply: Reply, state: PublicState) -> ParsedReply:
        reasoning, rest = split_reasoning(reply.text)
        calls: list[ToolCall] = []
        broken = False
        for match in self._ACTION.finditer(rest):
            verb, start = match.group(1).lower(), match.end()
            argument = _bracket_argument(rest, start, state.clickables if verb == "click" else ())
            if argument is None:
                broken = True
                continue
            key = "query" if verb == "search" else "value"
            calls.append(ToolCall(verb, {key: argument}, raw=f"{verb}[{argument}]"))
        content = rest.strip()

        def error(code: ProtocolErrorCode, message: str) -> ParsedReply:
            return ParsedReply(None, ProtocolError(code, message), tuple(calls), reasoning, content)

        if broken and not calls:
            return error("invalid_tool_call", "an action's '[' is never closed by ']'")
        if len(calls) != 1:
            return error(
                "tool_call_count",
                "write exactly one action, search[...] or click[...]; "
                f"got {len(calls) + int(broken)}",
            )
        action, problem = validate_call(calls[0].name, calls[0].arguments, state)
        if problem is not None:
            return error(problem.code, problem.message)
        return ParsedReply(action, None, tuple(calls), reasoning, content)

    def feedback_messages(self, parsed: ParsedReply, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]


ActionProtocol = ToolsProtocol | TextProtocol


def make_protocol(name: str, language: Literal["zh", "en"] = "en") -> ActionProtocol:
    if name == "tools":
        return ToolsProtocol(language)
    if name == "text":
        return TextProtocol()
    raise ValueError(f"unknown action protocol {name!r}; known: tools, text")


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_XML_FUNCTION = re.compile(r"^\s*<function=([^>\s]+)>(.*?)</function>\s*$", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


def _parse_tool_call_text(text: str) -> tuple[tuple[ToolCall, ...], str, bool]:
    """(calls, content outside the calls, broken) from generated text."""
    parsed = [_parse_one_call(block) for block in _TOOL_CALL_BLOCK.findall(text)]
    remainder = _TOOL_CALL_BLOCK.sub("", text)
    broken = "<tool_call>" in remainder or any(call is None for call in parsed)
    return tuple(call for call in parsed if call is not None), remainder.strip(), broken


def _parse_one_call(block: str) -> ToolCall | None:
    xml = _XML_FUNCTION.match(block)
    if xml:  # Qwen3-Coder: <function=click><parameter=value>buy now</parameter></function>
        arguments = {key: value.strip("\n") for key, value in _XML_PARAMETER.findall(xml.group(2))}
        return ToolCall(xml.group(1), arguments, raw=block)
    try:  # Hermes / Qwen3: {"name": "click", "arguments": {"value": "buy now"}}
        payload = json.loads(block)
    except json.JSONDecodeError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    return ToolCall(payload["name"], coerce_arguments(payload.get("arguments")), raw=block)


def coerce_arguments(arguments: Any) -> dict[str, Any] | None:
    """Arguments as a dict: servers send a JSON string, templates a JSON object; else None."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    return arguments if isinstance(arguments, dict) else None


def _bracket_argument(text: str, start: int, clickables: Sequence[str]) -> str | None:
    """The argument after `verb[`: the longest clickable closed by ']', else the text up to ']'."""
    rest = text[start:]
    folded = rest.casefold()
    best = None
    for item in clickables:
        if folded.startswith(item.casefold() + "]") and (best is None or len(item) > len(best)):
            best = item
    if best is not None:
        return rest[: len(best)]
    end = rest.find("]")
    if end < 0 or "\n" in rest[:end]:
        return None
    return rest[:end]
