"""Action protocols: exactly one valid action per turn, every other reply a coded protocol error."""

from __future__ import annotations

import json

import pytest

from shared.runtime.agent.protocols import Reply, TextProtocol, ToolCall, ToolsProtocol
from shared.runtime.shopsim.types import PublicState

HOME = PublicState("search", (), True, 0, 30)
ITEM = PublicState("item", ("back to search", "size=M", "B002 [refurb]", "buy now"), False, 3, 30)

text = TextProtocol()
tools = ToolsProtocol("en")


def call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.mark.parametrize(
    ("reply", "state", "action", "code"),
    [
        ("search[red shoes]", HOME, "search[red shoes]", None),
        ("Thought: need M.\nAction: click[size=M]", ITEM, "click[size=M]", None),
        ("click[Buy Now]", ITEM, "click[buy now]", None),
        ("click[B002 [refurb]]", ITEM, "click[B002 [refurb]]", None),
        ("<think>maybe click[buy now]</think>click[size=M]", ITEM, "click[size=M]", None),
        ("search[shoes]", ITEM, None, "unavailable_tool"),
        ("click[size=XL]", ITEM, None, "invalid_tool_arguments"),
        ("search[   ]", HOME, None, "invalid_tool_arguments"),
        ("click[size=M] click[buy now]", ITEM, None, "tool_call_count"),
        ("I will buy it.", ITEM, None, "tool_call_count"),
        ("click[size=M", ITEM, None, "invalid_tool_call"),
    ],
)
def test_text_protocol(
    reply: str, state: PublicState, action: str | None, code: str | None
) -> None:
    parsed = text.parse(Reply(reply), state)
    assert parsed.action == action
    assert (parsed.error.code if parsed.error else None) == code


@pytest.mark.parametrize(
    ("reply", "state", "action", "code"),
    [
        (call("search", query="red shoes"), HOME, "search[red shoes]", None),
        (
            "<think>size first</think>\n\n" + call("click", value="size=M"),
            ITEM,
            "click[size=M]",
            None,
        ),
        (
            "<tool_call>\n<function=click>\n<parameter=value>\nbuy now\n</parameter>\n"
            "</function>\n</tool_call>",
            ITEM,
            "click[buy now]",
            None,
        ),
        ("Sure! " + call("click", value="buy now"), ITEM, None, "mixed_content"),
        (
            call("click", value="size=M") + call("click", value="buy now"),
            ITEM,
            None,
            "tool_call_count",
        ),
        ("no call at all", ITEM, None, "tool_call_count"),
        ("<tool_call>{not json}</tool_call>", ITEM, None, "invalid_tool_call"),
        (call("click", value="size=M") + "<tool_call>{", ITEM, None, "invalid_tool_call"),
        (call("purchase", value="x"), ITEM, None, "invalid_tool_call"),
        (call("search", query="shoes"), ITEM, None, "unavailable_tool"),
        (call("click", value="size=XL"), ITEM, None, "invalid_tool_arguments"),
        (call("click", value="size=M", extra="1"), ITEM, None, "invalid_tool_arguments"),
        (call("click", item="size=M"), ITEM, None, "invalid_tool_arguments"),
    ],
)
def test_tools_protocol_from_generated_text(
    reply: str, state: PublicState, action: str | None, code: str | None
) -> None:
    parsed = tools.parse(Reply(reply), state)
    assert parsed.action == action
    assert (parsed.error.code if parsed.error else None) == code


def test_tools_protocol_from_server_parsed_calls() -> None:
    ok = tools.parse(
        Reply("", (ToolCall("click", {"value": "buy now"}, call_id="c1"),), "thinking"), ITEM
    )
    assert ok.action == "click[buy now]" and ok.reasoning == "thinking"
    broken = tools.parse(Reply("", (ToolCall("click", None, call_id="c1"),)), ITEM)
    assert broken.error is not None and broken.error.code == "invalid_tool_call"
    mixed = tools.parse(Reply("text", (ToolCall("click", {"value": "buy now"}),)), ITEM)
    assert mixed.error is not None and mixed.error.code == "mixed_content"
    # Feedback answers every call id the server gave.
    two = tools.parse(
        Reply(
            "", (ToolCall("click", {"value": "a"}, call_id="x"), ToolCall("click", {}, call_id="y"))
        ),
        ITEM,
    )
    messages = tools.feedback_messages(two, two.error.feedback())  # type: ignore[union-attr]
    assert [m["tool_call_id"] for m in messages] == ["x", "y"]
    assert json.loads(messages[0]["content"]) == {
        "type": "tool_protocol_error",
        "code": "tool_call_count",
        "message": two.error.message,  # type: ignore[union-attr]
    }


def test_tool_schemas_follow_the_page() -> None:
    home = tools.tools(HOME)
    assert [tool["function"]["name"] for tool in home] == ["search", "click"]
    item = tools.tools(ITEM)
    assert [tool["function"]["name"] for tool in item] == ["click"]
    assert item[0]["function"]["parameters"]["properties"]["value"]["enum"] == list(ITEM.clickables)
    assert "首页" in ToolsProtocol("zh").tools(HOME)[0]["function"]["description"]
    assert text.tools(ITEM) is None


def test_feedback_roles() -> None:
    none = tools.parse(Reply("hello"), ITEM)
    assert tools.feedback_messages(none, "x") == [{"role": "user", "content": "x"}]
    one = tools.parse(Reply(call("click", value="size=M")), ITEM)
    assert tools.feedback_messages(one, "obs") == [{"role": "tool", "content": "obs"}]
    assert text.feedback_messages(text.parse(Reply("click[size=M]"), ITEM), "obs") == [
        {"role": "user", "content": "obs"}
    ]
