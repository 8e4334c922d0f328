import pytest
from pydantic import ValidationError

from shared.contracts.chunks import (
    SKILL_BLOCK_HEADER,
    ChunkContent,
    InjectedChunk,
    render_chunk,
    render_skill_block,
    select_injected,
)

# The verbatim frozen cold-start chunk from the method text.
QUERY_CHUNK = ChunkContent(
    title="搜索查询构建 - 显式约束整合",
    applies_when="任务包含明确属性约束（品牌、颜色、尺寸、价格、功能等）时",
    procedure=[
        "将所有核心属性约束整合为单一搜索查询词",
        "将价格约束、产品形态、核心成分等关键要素直接融入搜索词",
        "避免使用泛化搜索词或分步搜索",
    ],
    verify="验证搜索结果首屏是否出现匹配所有核心约束的商品",
    avoid="搜索词过于宽泛或遗漏关键约束导致结果不相关",
)
PRICE_CHUNK = ChunkContent(
    title="Price check",
    applies_when="the task states a budget",
    procedure=["select every option first", "read the resolved price"],
    verify="the price shown is within the budget",
    avoid="buying before the price reflects the selected option",
)


def test_render_chunk_has_the_four_fields_in_order():
    text = render_chunk(QUERY_CHUNK)
    assert text.splitlines()[0] == "### 搜索查询构建 - 显式约束整合"
    labels = [line.split(":")[0] for line in text.splitlines() if line.startswith("- ")]
    assert labels == ["- Applies when", "- Procedure", "- Verify", "- Avoid"]
    assert "  2. 将价格约束、产品形态、核心成分等关键要素直接融入搜索词" in text


def test_empty_mask_renders_no_block_at_all():
    assert render_skill_block([]) == ""


def test_block_keeps_bank_order_and_tags_id_and_version():
    chunks = [
        InjectedChunk(chunk_id="chunk-b", version=2, content=PRICE_CHUNK),
        InjectedChunk(chunk_id="chunk-a", version=1, content=QUERY_CHUNK),
    ]
    block = render_skill_block(chunks)
    assert block.startswith(SKILL_BLOCK_HEADER + "\n")
    assert block.index('<skill id="chunk-b" version="2">') < block.index(
        '<skill id="chunk-a" version="1">'
    )
    assert block.count("</skill>") == 2


def test_select_injected_follows_the_inclusion_vector():
    chunks = [InjectedChunk(chunk_id=f"c{i}", version=1, content=PRICE_CHUNK) for i in range(3)]
    assert [c.chunk_id for c in select_injected(chunks, [1, 0, 1])] == ["c0", "c2"]
    with pytest.raises(ValueError, match="3 chunks"):
        select_injected(chunks, [1, 0])
    with pytest.raises(ValueError, match="0 or 1"):
        select_injected(chunks, [1, 2, 0])


def test_content_hash_is_content_identity():
    same = ChunkContent(**QUERY_CHUNK.model_dump())
    assert same.content_hash() == QUERY_CHUNK.content_hash()
    assert PRICE_CHUNK.content_hash() != QUERY_CHUNK.content_hash()


@pytest.mark.parametrize(
    ("field", "value"),
    [("procedure", []), ("verify", "  "), ("title", "x" * 201), ("procedure", [""])],
)
def test_bad_content_is_refused_naming_the_field(field, value):
    data = PRICE_CHUNK.model_dump() | {field: value}
    with pytest.raises(ValidationError) as error:
        ChunkContent(**data)
    assert error.value.errors()[0]["loc"][0] == field


def test_missing_verify_is_refused():
    data = PRICE_CHUNK.model_dump()
    del data["verify"]
    with pytest.raises(ValidationError, match="verify"):
        ChunkContent(**data)
