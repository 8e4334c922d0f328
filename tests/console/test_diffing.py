"""Word-level diffs: what the bank-diff and chunk pages show of a rewrite."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.console.diffing import chunk_diff, step_diff, word_diff
from shared.contracts.chunks import ChunkContent


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
    assert [(s.new_number, s.kind, side(s.pieces, "removed")) for s in procedure.steps] == [
        (1, "added", "one"),
        (2, "added", "two"),
    ]
    assert not any(field.changed for field in chunk_diff(content, content))


def test_an_inserted_step_leaves_the_old_steps_whole_and_diffs_each_against_its_successor():
    old = ["open the item page", "compare the price with the budget", "buy it"]
    new = [
        "open the item page",
        "read the price of the selected option, not the range",
        "compare the unit price with the budget",
        "buy it",
    ]
    steps = step_diff(old, new)
    assert [(s.old_number, s.new_number, s.kind) for s in steps] == [
        (1, 1, "same"),
        (None, 2, "added"),
        (2, 3, "changed"),
        (3, 4, "changed"),
    ]
    # Old step 2 against new step 3 only: its one changed word, nothing of the new step 2.
    assert [(p.kind, p.text) for p in steps[2].pieces if p.kind != "same"] == [("added", " unit")]
    assert all(p.kind == "same" for p in steps[3].pieces)  # renumbered, not reworded


def test_a_step_rewritten_beyond_recognition_is_a_removal_and_an_addition():
    steps = step_diff(["check the colour"], ["scroll to the reviews first"])
    assert [(s.old_number, s.new_number) for s in steps] == [(1, None), (None, 1)]


steps_lists = st.lists(
    st.sampled_from(
        [
            "open the page",
            "pick size",
            "pick colour",
            "buy now",
            "check the price",
            "compare price and budget",
        ]
    ),
    max_size=6,
)


@given(steps_lists, steps_lists)
def test_either_sides_steps_are_the_diff_without_the_other_sides_words(old, new):
    steps = step_diff(old, new)
    assert [side(s.pieces, "added") for s in steps if s.old_number] == old
    assert [side(s.pieces, "removed") for s in steps if s.new_number] == new
    assert [s.old_number for s in steps if s.old_number] == list(range(1, len(old) + 1))
    assert [s.new_number for s in steps if s.new_number] == list(range(1, len(new) + 1))
