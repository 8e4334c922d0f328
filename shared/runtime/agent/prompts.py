"""Prompt layouts: how a task, a persona, an observation and the injected chunks become messages.

The system message is the agent instructions, then the persona document, then the skill block
(only when at least one chunk is injected), joined by blank lines. The skill block comes from
`shared.contracts.chunks.render_skill_block`, the function the registry's render endpoint also uses, so the
bare prompt and every skill prompt are byte-identical outside that block.

Each layout is a versioned, immutable string set; its version is recorded in every trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shared.contracts.chunks import (
    RENDERER_VERSION,
    SKILL_BLOCK_CAVEAT,
    SKILL_BLOCK_HEADER,
    InjectedChunk,
    render_skill_block,
)
from shared.contracts.hashing import content_hash

ProtocolName = Literal["tools", "text"]

_INSTRUCTIONS_ZH_TOOLS = """你是一名个性化购物助手，在一个文字购物网站上替用户完成一次购买。
规则：
1. 每一轮只调用一个工具：首页上用 search(query) 搜索商品；其他页面用 click(value) \
点击当前页面的一个可点击项。不要在工具调用之外输出正文。
2. 购物任务只写出了部分要求；结合用户个人文档（画像、偏好、历史）推断其余要求，\
如品牌、属性、规格和预算。
3. 先核验候选商品的类别、属性、选项和价格，再决定购买。
4. 购买前必须为商品的每一个选项维度（如颜色、尺寸）选定取值，然后点击 buy now。
5. 在思考中完成推理；每一轮最终只输出一次工具调用。"""

_INSTRUCTIONS_EN_TEXT = """You are a shopping agent on a text shopping site. \
Buy the one product that fits the task and the user's profile.
Reply each turn with exactly one action:
search[query] - only on the home page
click[value] - value exactly as one of the page's clickable items
Pick every option (size, color, ...) before click[buy now]."""

_INSTRUCTIONS_EN_TOOLS = """You are a shopping agent on a text shopping site. \
Buy the one product that fits the task and the user's profile.
Call exactly one tool per turn: search(query) on the home page, click(value) on other pages. \
Write nothing outside the tool call.
Pick every option (size, color, ...) before clicking buy now."""


_EN_CAVEAT = (
    "These hints give general strategy only; still verify against the current task and page."
)


@dataclass(frozen=True)
class PromptLayout:
    """One versioned prompt layout and the action protocol its instructions describe."""

    version: str
    language: Literal["zh", "en"]
    protocol: ProtocolName
    instructions: str
    persona_heading: str
    persona_style: Literal["json", "lines"]
    skill_header: str
    skill_caveat: str
    task_heading: str

    def system_message(self, persona: Mapping[str, Any], chunks: Sequence[InjectedChunk]) -> str:
        """Instructions, persona document, then the skill block only when chunks are injected."""
        sections = [
            self.instructions,
            self.persona_heading + render_persona(persona, self.persona_style),
        ]
        block = render_skill_block(chunks, header=self.skill_header, caveat=self.skill_caveat)
        if block:
            sections.append(block)
        return "\n\n".join(sections)

    def first_user_message(self, instruction: str, observation: str) -> str:
        """The task's simple instruction and the first observation."""
        return f"{self.task_heading}\n{instruction}\n\n{observation}"

    def fingerprint(self) -> str:
        """Hash of every string of the layout: an edited layout cannot pass as the old version."""
        return content_hash(
            {
                "version": self.version,
                "instructions": self.instructions,
                "persona": [self.persona_heading, self.persona_style],
                "skill": [self.skill_header, self.skill_caveat, RENDERER_VERSION],
                "task": self.task_heading,
                "protocol": self.protocol,
            }
        )


def render_persona(persona: Mapping[str, Any], style: Literal["json", "lines"]) -> str:
    """The persona document: the reference's sorted JSON, or compact `key: value` lines."""
    if style == "json":
        return json.dumps(persona, sort_keys=True, ensure_ascii=False)
    lines: list[str] = []
    _flatten(persona, "", lines)
    return "\n".join(lines)


def _flatten(value: Any, prefix: str, lines: list[str]) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value):
            _flatten(value[key], f"{prefix}.{key}" if prefix else str(key), lines)
    elif isinstance(value, list | tuple) and all(
        not isinstance(item, Mapping | list | tuple) for item in value
    ):
        lines.append(f"{prefix}: {', '.join(str(item) for item in value)}")
    elif isinstance(value, list | tuple):
        lines.append(f"{prefix}: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}")
    elif value is not None and value != "":
        lines.append(f"{prefix}: {value}")


LAYOUTS: dict[str, PromptLayout] = {
    layout.version: layout
    for layout in (
        # The reference's layout (ShoppingPromptBuilder, persona_single_turn.txt paraphrased).
        PromptLayout(
            version="shopsim-shopping-agent-tools-v2",
            language="zh",
            protocol="tools",
            instructions=_INSTRUCTIONS_ZH_TOOLS,
            persona_heading="用户个人文档：\n",
            persona_style="json",
            skill_header=SKILL_BLOCK_HEADER,
            skill_caveat=SKILL_BLOCK_CAVEAT,
            task_heading="购物任务：",
        ),
        # Compact English layouts for small models on a CPU: short instructions and a persona
        # rendered as lines (fewer prompt tokens; prefill dominates CPU rollouts).
        PromptLayout(
            version="shopsim-compact-en-text-v1",
            language="en",
            protocol="text",
            instructions=_INSTRUCTIONS_EN_TEXT,
            persona_heading="User profile:\n",
            persona_style="lines",
            skill_header="[Optional strategy hints]",
            skill_caveat=_EN_CAVEAT,
            task_heading="Task:",
        ),
        PromptLayout(
            version="shopsim-compact-en-tools-v1",
            language="en",
            protocol="tools",
            instructions=_INSTRUCTIONS_EN_TOOLS,
            persona_heading="User profile:\n",
            persona_style="lines",
            skill_header="[Optional strategy hints]",
            skill_caveat=_EN_CAVEAT,
            task_heading="Task:",
        ),
    )
}

DEFAULT_LAYOUT = "shopsim-compact-en-text-v1"
REFERENCE_LAYOUT = "shopsim-shopping-agent-tools-v2"


def get_layout(version: str) -> PromptLayout:
    """The layout of a version string; a clear error names the known ones."""
    try:
        return LAYOUTS[version]
    except KeyError:
        raise ValueError(f"unknown prompt version {version!r}; known: {sorted(LAYOUTS)}") from None
