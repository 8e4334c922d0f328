"""Word-level diffs: what the bank-diff and chunk pages show of a rewrite."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.console.diffing import chunk_diff, word_diff
from shared.chunks import ChunkContent


def side(pieces, drop: str) -> str:
    return "".join(p.text for p in pieces if p.kind != drop)


def test_a_changed_word_is_marked_and_the_rest_left_alone():
    pieces = word_diff(
        "compare the price with the budget", "compare the unit price with the budget"
    )
    assert [(p.kind, p.text.strip()) for p in pieces if p.kind != "same"] == [("added", "unit")]


def test_chinese_text_differs_character_by_character():
    pieces = word_diff("将所有核心属性约束整合", "将所有属性约束整合")
    assert [(p.kind, p.text) for p in pieces if p.kind != "same"] == [("removed", "核心")]


@given(st.text(max_size=60), st.text(max_size=60))
def test_either_side_is_the_diff_without_the_other_sides_words(old, new):
    pieces = word_diff(old, new)
    assert side(pieces, "added") == old and side(pieces, "removed") == new


def test_an_added_chunk_is_all_insertion_and_unchanged_fields_say_so():
    content = ChunkContent(
        title="t", applies_when="a", procedure=["one", "two"], verify="v", avoid="x"
    )
    added = chunk_diff(None, content)
    assert all(piece.kind == "added" for field in added for piece in field.pieces)
    procedure = next(f for f in added if f.name == "procedure")
    assert side(procedure.pieces, "removed") == "1. one\n2. two"
    assert not any(field.changed for field in chunk_diff(content, content))
