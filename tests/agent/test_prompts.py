"""Prompt layouts: bare and skill prompts differ only in the shared-renderer skill block."""

from __future__ import annotations

import json

import pytest

from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.runtime.agent.prompts import LAYOUTS, REFERENCE_LAYOUT, get_layout, render_persona
from shared.runtime.agent.runner import EpisodeSpec

PERSONA = {
    "name": "李雷",
    "budget": 80,
    "likes": ["红色", "cheap"],
    "history": [{"item": "shoe", "rating": 5}],
}


def chunk(chunk_id: str, version: int = 1) -> InjectedChunk:
    content = ChunkContent(
        title=f"title {chunk_id}",
        applies_when="when x",
        procedure=["step one", "step two"],
        verify="check y",
        avoid="avoid z",
    )
    return InjectedChunk(chunk_id=chunk_id, version=version, content=content)


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_bare_and_skill_prompts_differ_only_in_the_block(version: str) -> None:
    layout = get_layout(version)
    chunks = [chunk("c1"), chunk("c2", 3)]
    bare = layout.system_message(PERSONA, [])
    skill = layout.system_message(PERSONA, chunks)
    block = render_skill_block(chunks, header=layout.skill_header, caveat=layout.skill_caveat)
    assert skill == bare + "\n\n" + block
    assert layout.skill_header not in bare and "<skill" not in bare
    assert '<skill id="c2" version="3">' in skill


def test_reference_layout_matches_the_reference_shape() -> None:
    layout = get_layout(REFERENCE_LAYOUT)
    system = layout.system_message(PERSONA, [chunk("c1")])
    instructions, persona, block = system.split("\n\n", 2)
    assert persona == "用户个人文档：\n" + json.dumps(PERSONA, sort_keys=True, ensure_ascii=False)
    assert block.startswith(
        '[可选策略提示]\n这些提示只提供通用策略；仍需依据当前任务和页面独立核验。\n<skill id="c1"'
    )
    assert "buy now" in instructions
    assert layout.first_user_message("买鞋", "OBS") == "购物任务：\n买鞋\n\nOBS"
    assert layout.protocol == "tools"


def test_masked_spec_keeps_bank_order_and_records_inclusion() -> None:
    bank = [chunk("a"), chunk("b"), chunk("c")]
    spec = EpisodeSpec.masked("t1", 7, bank, [1, 0, 1], bank_id="bank-1", bank_hash="h")
    assert [c.chunk_id for c in spec.chunks] == ["a", "c"]
    assert spec.inclusion == (1, 0, 1)
    empty = EpisodeSpec.masked("t1", 7, bank, [0, 0, 0])
    assert empty.chunks == ()
    with pytest.raises(ValueError):
        EpisodeSpec.masked("t1", 7, bank, [1, 0])


def test_compact_persona_is_lines_and_shorter_than_json() -> None:
    lines = render_persona(PERSONA, "lines")
    assert "likes: 红色, cheap" in lines.splitlines()
    assert "budget: 80" in lines.splitlines()
    assert len(lines) < len(json.dumps(PERSONA, ensure_ascii=False, indent=1))


def test_layout_versions_and_fingerprints() -> None:
    prints = {layout.fingerprint() for layout in LAYOUTS.values()}
    assert len(prints) == len(LAYOUTS)
    with pytest.raises(ValueError, match="known"):
        get_layout("nope-v0")
