"""Chinese numerals read as Arabic digits (`shared/runtime/leak/chinese_numerals.py`), the firewall's price
rule's input. Expected values are the numbers the Chinese spells, worked out by hand."""

import pytest

from shared.runtime.leak.chinese_numerals import arabic_numerals, numeral_value


@pytest.mark.parametrize(
    ("numeral", "value"),
    [
        ("一百二十九", 129),
        ("壹佰贰拾玖", 129),
        ("貳佰參拾陸", 236),
        ("一二九", 129),  # digits alone, read one by one
        ("二〇二四", 2024),
        ("十二", 12),  # 十 opens a numeral without its 一
        ("一十二", 12),
        ("二十", 20),
        ("一百十", 110),
        ("一百零二", 102),
        ("一千零五十", 1050),
        ("两千零五", 2005),
        ("一万零五", 10005),
        ("一百二", 120),  # a trailing digit in the next lower place, as spoken
        ("一千五", 1500),
        ("三万五", 35000),
        ("三万五千", 35000),
        ("一千二百九十九", 1299),
        ("一亿二千万", 120_000_000),
        ("廿九", 29),
        ("卅", 30),
        ("零", 0),
    ],
)
def test_numeral_values(numeral, value):
    assert numeral_value(numeral) == value


@pytest.mark.parametrize(
    "numeral", ["一二百", "九九八十一", "二十一百", "百", "十十", "万", "百二", "元", "a", ""]
)
def test_runs_that_are_no_numeral_have_no_value(numeral):
    assert numeral_value(numeral) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("价格一百二十九元", "价格129元"),
        ("一 百 二 十 九 元", "129 元"),  # spacing does not hide a numeral
        ("三百四十八元五角", "348.50元"),
        ("叁佰肆拾捌元伍角贰分", "348.52元"),
        ("三百四十八块五毛", "348.50块"),
        ("一百二十九块九毛九", "129.99块"),
        ("十二元五分", "12.05元"),
        ("两块五", "2.5块"),  # the digit after the currency is its tenths
        ("两块五个", "2块5个"),  # unless a word follows: five of them
        ("百分之一百二十九", "129%"),
        ("百分之12.5", "12.5%"),
        ("万一一百二十九元的卖完了", "万一129元的卖完了"),  # a word glued to the front
        ("一二百个", "一200个"),  # the longest tail that is a numeral
        ("一千二百九十九点五", "1299.5"),
        ("一千二百九十九点五零元", "1299.50元"),  # every decimal digit, in order
        ("一百二元", "120元"),  # the spoken form stays an integer in the text
        ("三万五", "35000"),
    ],
)
def test_numerals_money_and_percentages_in_text(text, expected):
    assert arabic_numerals(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "千万不要直接购买",  # "by all means": a run that opens with 千 is a word
        "万一没有结果",  # "just in case"
        "3万",  # a mix with Arabic digits is left as written
        "1.5万元",
        "三点5元",  # Arabic digits in the decimals: the run is a mix too
        "129元",
        "price $348.00",
    ],
)
def test_words_and_mixed_or_malformed_runs_are_left_as_written(text):
    assert arabic_numerals(text) == text
