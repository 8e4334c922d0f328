import pytest

from shared.leak import GoldFacts, find_leaks


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("click B07XJ8C8F5 first", "product_id"),
        ("the ASIN of the gold item", "asin_word"),
        ("call 13800138000 now", "long_digit_run"),
        ("as in task-000123", "task_id"),
        ("as in task_42", "task_id"),
    ],
)
def test_fixed_patterns(text, rule):
    assert rule in {finding.rule for finding in find_leaks(text)}


def test_clean_procedural_text_passes():
    text = "将所有核心属性约束整合为单一搜索查询词; compare 3 candidates under 200 dollars"
    assert find_leaks(text) == []


def test_gold_terms_respect_minimum_lengths():
    text = "Prefer Acme brand and the Midnight Blue option"
    findings = find_leaks(
        text, gold_terms=[("brand", "Acme"), ("option", "blue"), ("option", "Midnight Blue")]
    )
    assert {(f.rule, f.text) for f in findings} == {
        ("gold_brand", "Acme"),
        ("gold_option", "Midnight Blue"),
    }


# Minimum lengths are inclusive (the rules say "6+", "3+", "2+", "5+"): a term exactly at the
# minimum is a leak, one character shorter is not.
@pytest.mark.parametrize(
    ("kind", "at_minimum", "below_minimum"),
    [
        ("title", "Zenbox", "Zenbo"),
        ("brand", "Jbl", "Lg"),
        ("option", "Cobalt", "Khaki"),
    ],
)
def test_minimum_lengths_are_inclusive(kind, at_minimum, below_minimum):
    assert find_leaks(f"choose {at_minimum} here", gold_terms=[(kind, at_minimum)])
    assert not find_leaks(f"choose {below_minimum} here", gold_terms=[(kind, below_minimum)])


def test_cjk_brand_counts_from_two_characters():
    gold = GoldFacts(brands_seen=("小米", "米"))
    assert {f.text for f in find_leaks("优先选小米", gold=gold)} == {"小米"}


def test_model_numbers_count_from_five_characters():
    gold = GoldFacts(goal_title="Zeta AB123 kettle", visited_titles=("Omega CD12 kettle",))
    assert find_leaks("look for ab123", gold=gold)
    assert not find_leaks("look for cd12", gold=gold)


@pytest.mark.parametrize("written", ["ANKER", "anker", "aNkEr"])
def test_gold_terms_match_whatever_the_case(written):
    assert find_leaks(f"prefer {written}", gold=GoldFacts(brands_seen=("Anker",)))


@pytest.mark.parametrize("written", ["MIDNIGHT BLUE", "midnightblue"])
def test_gold_options_match_whatever_the_case_and_spacing(written):
    assert find_leaks(f"select {written}", gold=GoldFacts(gold_options=("Midnight Blue",)))


@pytest.mark.parametrize(
    ("text", "is_id"),
    [
        ("open B0ABCDE123 now", True),
        ("(b0abcde123)", True),
        ("open XB0ABCDE123 now", False),  # part of a longer token: not an id shape
        ("open B0ABCDE1234 now", False),  # 9 characters after B0
        ("serial 7B0ABCDE123", False),
    ],
)
def test_product_id_shape_needs_token_boundaries(text, is_id):
    assert ("product_id" in {f.rule for f in find_leaks(text)}) is is_id
