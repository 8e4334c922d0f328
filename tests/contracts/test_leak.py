import pytest

from shared.leak import find_leaks


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
