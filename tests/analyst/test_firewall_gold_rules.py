"""The firewall's rules for every gold fact (issue 21, "Firewall: every gold fact, and no false
alarms"), one rule at a time: the leaks each rule must stop, and the ordinary advice it must
admit. Expected verdicts come from the issue's text and the rule written above each test, never
from running the firewall.
"""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from shared.runtime.leak import GoldFacts, find_leaks, model_codes
from shared.runtime.leak.catalog import CatalogIndex
from tests.analyst.test_firewall import EN_GOLD, ZH_GOLD

# The English gold of the vendored cases, with a price and a task number of four digits.
GOLD = replace(EN_GOLD, price=348.0, task_id="task-001932")


def rules(text: str, gold: GoldFacts = GOLD) -> set[str]:
    return {finding.rule for finding in find_leaks(text, gold=gold)}


# -- the gold price: any common way to write the amount; other numbers, budgets, percentages not
@pytest.mark.parametrize(
    "text",
    [
        "Pay $348.00 at most",
        "it costs 348 here",
        "about 348,00 in the listing",
        "USD 348 is the one",
        "three hundred forty-eight dollars",
        "Three hundred and forty-eight dollars, no more",
        "348 dollars and 0 cents",
        "pick the $348 variant",
        "348.0 is the price",
        "us$ 348",
    ],
)
def test_the_gold_price_in_any_common_form_is_a_leak(text):
    assert "gold_price" in rules(text)


@pytest.mark.parametrize(
    "text",
    [
        "Keep under $400 when the request says so",  # a budget
        "a 10% tolerance applies to approximate budgets",  # a percentage
        "348% of the budget is too much",  # a percentage, even of the same digits
        "compare 3 candidates, then buy",  # another number
        "the 3480 model and the 1348 one",  # numbers that contain the digits
        "$34.80 is another price",  # same digits, another amount
        "$3,480 is another price",
        "sizes run from 36 to 46",
    ],
)
def test_other_numbers_budgets_and_percentages_are_not_the_price(text):
    assert "gold_price" not in rules(text)


def test_a_bare_integer_is_a_price_from_three_digits_a_written_price_at_any_size():
    cheap = replace(GOLD, price=45.0)
    assert "gold_price" not in rules("buy 45 of them", cheap)  # any small number
    for written in ("$45", "45 dollars", "45.00", "45,00", "USD 45"):
        assert "gold_price" in rules(f"pay {written}", cheap), written


def test_prices_with_cents_and_thousands_match_in_either_notation():
    dear = replace(GOLD, price=1299.5)
    for written in ("$1,299.50", "1.299,50", "1299.5", "USD 1299,50"):
        assert "gold_price" in rules(f"pay {written}", dear), written
    assert "gold_price" not in rules("pay $1,298.50", dear)  # another amount to the cent
    assert "gold_price" not in rules("pay $1,298", dear)  # not the price rounded to the unit


# -- the gold price in Chinese numerals or full-width digits (issue #21): read as its digits
ZH_PRICED = replace(ZH_GOLD, price=129.0)


@pytest.mark.parametrize(
    "text",
    [
        "选价格为一百二十九元的那款",
        "选壹佰贰拾玖元的型号",  # financial numerals
        "就买一百二十九块的",
        "壹佰贰拾玖圆整",
        "价格是一二九",  # read digit by digit, a bare number of three digits
        "一百廿九元",  # 廿: twenty
        "价格为１２９元",  # full-width digits
        "付￥１２９即可",  # and a full-width yen sign
        "按 一 百 二 十 九 元 下单",  # spaced: whitespace is no part of a numeral
        "万一一百二十九元的卖完了就换一个",  # a word glued to the front ("in case")
    ],
)
def test_the_gold_price_in_chinese_numerals_or_full_width_digits_is_a_leak(text):
    assert "gold_price" in rules(text, ZH_PRICED)


def test_chinese_cents_thousands_and_small_prices_are_the_price_as_written():
    cents = replace(ZH_GOLD, price=348.5)
    for written in ("三百四十八元五角", "三百四十八块五", "叁佰肆拾捌元伍角", "三百四十八点五元"):
        assert "gold_price" in rules(f"付{written}", cents), written
    assert "gold_price" not in rules("付三百四十七元", cents)  # not 348.5 rounded to the unit
    assert "gold_price" not in rules("付三百四十八元四角", cents)  # another amount to the jiao
    dear = replace(ZH_GOLD, price=1299.0)
    for written in ("一千二百九十九元", "壹仟贰佰玖拾玖元", "一千二百九十九"):
        assert "gold_price" in rules(f"付{written}", dear), written
    cheap = replace(ZH_GOLD, price=45.0)
    for written in ("四十五元", "四十五块", "肆拾伍圆"):  # a written price at any size
        assert "gold_price" in rules(f"付{written}", cheap), written
    assert "gold_price" not in rules("买四十五个", cheap)  # a bare small number is any number


@pytest.mark.parametrize(
    "text",
    [
        "一百二十八元的也行",  # another amount
        "一千二百九十元的那款",  # numbers that contain the digits
        "一二九零号",
        "１２９０元",
        "十二点九元",
        "一百二十九点五元",  # same digits, another amount
        "一百二十九元五角",
        "百分之一百二十九",  # a percentage
        "价格的百分之129",
    ],
)
def test_near_misses_in_chinese_numerals_are_not_the_price(text):
    assert "gold_price" not in rules(text, ZH_PRICED)


@pytest.mark.parametrize(
    "text",
    [
        "比较不超过三个候选商品，优先选择标题包含全部约束的那一个。",
        "万一第一页没有合适的商品，千万不要直接购买，先逐一核对每个选项。",
        "价格要在预算之内，打八折的商品也要核对最终价格。",
        "第一步搜索，第二步打开结果，第三步选择选项，最后购买。",
    ],
)
def test_an_ordinary_chinese_sentence_without_the_price_is_admitted(text):
    assert find_leaks(text, gold=ZH_PRICED) == []


# -- model codes: letter-digit tokens of any title (3+ characters), alone, split, O/l for 0/1
def test_model_codes_are_read_from_every_title_down_to_three_characters():
    # goal title "Sony WH-1000XM5 ...", purchase "... Life Q30 ...", visited "JBL Tune 760NC ..."
    codes = {code for title in GOLD.titles for code in model_codes(title)}
    assert {"wh1000xm5", "1000xm5", "xm5", "q30", "760nc"} <= codes


@pytest.mark.parametrize(
    "text",
    [
        "the XM5 is the one",
        "look for Q30",
        "pick the 760NC",
        "the XM 5 variant",
        "the XM-5 variant",
        "a Q-30 model",
        "the 760 NC",
        "look for Q3O",  # letter O for zero
        "the 76O-NC",
        "the 760nc-style one",
    ],
)
def test_model_codes_alone_split_or_with_letters_for_digits_are_leaks(text):
    assert "gold_model_number" in rules(text)


@pytest.mark.parametrize(
    "title, text",
    [
        ("Zeta X2 kettle", "the x2"),  # two characters: too short to name a model
        ("Zeta 64GB tablet", "choose 64GB"),  # a quantity with a unit
        ("Zeta 2nd Gen kettle", "open the 2nd result"),  # an ordinal
        ("Zeta 3-in-1 tool", "a 3-in-1 tool"),  # a phrase
        ("Zeta USB3 hub", "a USB3 port"),  # a common standard
        ("Zeta A12 player", "buy a 12 pack"),  # a short word and a number
        ("Zeta Q30 kettle", "faq 30 days"),  # inside another word
        ("Zeta Q30 kettle", "the q300"),  # another, longer code
    ],
)
def test_quantities_ordinals_standards_and_other_tokens_are_not_model_codes(title, text):
    assert "gold_model_number" not in rules(text, GoldFacts(visited_titles=(title,)))


# -- product lines and sub-brands: title words that are no ordinary English word
@pytest.mark.parametrize(
    "text", ["prefer Soundcore", "SOUNDCORE first", "a sound-core model", "S o u n d c o r e"]
)
def test_a_product_line_that_is_no_ordinary_word_is_a_leak(text):
    assert "gold_line" in rules(text)


@pytest.mark.parametrize(
    "text",
    [
        "tune the query to the request",  # JBL Tune: an ordinary word
        "a studio apartment needs a compact one",  # Beats Studio Pro
        "battery life matters",  # Soundcore Life
        "hybrid or active designs",
    ],
)
def test_ordinary_title_words_are_not_product_lines(text):
    assert "gold_line" not in rules(text)


# -- encodings are decoded before any rule runs
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("prefer A&#110;ker", "gold_brand"),
        ("prefer An%6Ber", "gold_brand"),
        ("open %42%30C7X2LQ9P", "product_id"),
        ("open &lt;B0C7X2LQ9P&gt;", "product_id"),
        ("pay &#36;348", "gold_price"),
        ("prefer A&amp;#110;ker", "gold_brand"),  # encoded twice
        ("prefer Sound%20core", "gold_line"),
    ],
)
def test_html_entities_and_percent_encoding_are_decoded_before_matching(text, rule):
    assert rule in rules(text)


def test_decoding_leaves_ordinary_percent_signs_alone():
    assert not find_leaks("a 10% tolerance, 100% of the axes set", gold=GOLD)


# -- a gold id in two halves, in either order, each half 4+ characters
@pytest.mark.parametrize(
    "text",
    [
        "the id starts B0C7X and ends 2LQ9P",
        "ends with 2LQ9P; starts with B0C7X",
        "B0C7 then X2LQ9P",
        "first half b0c7x2, second lq9p",
    ],
)
def test_a_gold_id_in_two_halves_is_a_leak(text):
    assert "product_id" in rules(text)


def test_a_fragment_other_catalog_ids_share_or_one_under_four_characters_is_not_the_id():
    # issue 31: a run of 4+ characters counts unless another product id of the catalog holds it
    siblings = CatalogIndex.build([], ["B0C7X2LQ9P", "B0C7XAAAAA", "B0C7XBBBBB"])
    shared_prefix = replace(GOLD, catalog=siblings)
    assert "product_id" not in rules("the prefix B0C7X is common", shared_prefix)
    assert "product_id" in rules("the prefix B0C7X is common")  # no other id holds it
    assert "product_id" not in rules("B0C, then 7X2 and more", GoldFacts(product_ids=("B0C7X2L",)))


# -- the task number without its prefix or leading zeros
@pytest.mark.parametrize(
    "text", ["case 1932", "see #1932", "the answer to 001932", "1932: buy it", "Task-1932"]
)
def test_the_task_number_without_prefix_or_zeros_is_a_leak(text):
    assert "task_id" in rules(text)


@pytest.mark.parametrize("text", ["case 19320", "step 193", "19.32 is a price", "21932 items"])
def test_other_numbers_are_not_the_task_number(text):
    assert "task_id" not in rules(text)


# -- the two false alarms the issue names, and the rules behind them
@pytest.mark.parametrize(
    "text",
    [
        "A focused query beats a broad one.",
        "Nothing beats checking every option axis.",
        "Beats the rest: compare the option prices.",  # sentence-initial: still the verb
        "- beats any guess: read the page",
        "Compare prices. Beats the rest when the budget is tight.",  # after a full stop
        "2) Beats any single query.",  # a numbered list item
    ],
)
def test_beats_used_as_a_verb_is_not_the_brand(text):
    assert "gold_brand" not in rules(text)


@pytest.mark.parametrize(
    "text",
    [
        "prefer beats headphones",
        "choose beats the most often",  # after a word of choosing
        "When two tie, Beats every time.",  # capitalized inside a sentence, before a determiner
        "PREFER BEATS",
        "beats.",
    ],
)
def test_beats_written_as_a_name_is_the_brand(text):
    assert "gold_brand" in rules(text)


def test_a_brand_that_is_no_ordinary_word_is_a_leak_even_before_a_determiner():
    assert "gold_brand" in rules("kalix the rest", GoldFacts(brands_seen=("Kalix",)))


@pytest.mark.parametrize(
    "text", ["A task: 30 steps at most.", "Task: 3 queries, then buy.", "each task 12 turns"]
)
def test_a_count_after_task_is_not_a_task_id(text):
    assert not find_leaks(text)


@pytest.mark.parametrize("text", ["as in task 42", "task: 42", "TASK_004217 again"])
def test_a_number_after_task_that_counts_nothing_is_a_task_id(text):
    assert "task_id" in {f.rule for f in find_leaks(text)}


# -- the registry's check (no gold): issue 22's two admitted evasions
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("open BOABCDEFGH now", "product_id"),  # letter O for the zero
        ("open bo1234abcd now", "product_id"),
        ("call 123,456,7890", "long_digit_run"),
        ("call 1,234,567,890", "long_digit_run"),
    ],
)
def test_the_registry_check_stops_a_letter_o_id_and_comma_grouped_digits(text, rule):
    assert rule in {f.rule for f in find_leaks(text)}


@pytest.mark.parametrize(
    "text", ["boundaries of the budget", "a bottleneck in the search", "bookmarked pages"]
)
def test_ordinary_words_of_the_id_shape_are_not_ids(text):
    assert not find_leaks(text)


# -- the contract: `gold.price` is an optional number
def test_the_contract_carries_an_optional_numeric_price():
    assert GoldFacts.from_json({"price": 348}).price == 348.0
    assert GoldFacts.from_json({"price": 19.99}).price == 19.99
    assert GoldFacts.from_json({"price": 0}).price == 0.0  # a free item has a price too
    assert GoldFacts.from_json({"price": 0.5}).price == 0.5
    assert GoldFacts.from_json({}).price is None
    assert GoldFacts.from_json(GOLD.as_json()) == GOLD
    for bad in ("348", True, -1, float("nan"), float("inf"), [348]):
        with pytest.raises(ValueError, match=r"gold\.price"):
            GoldFacts.from_json({"price": bad})


def run_firewall(tmp_path, cases):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "analyst", "firewall", str(path), "--json"],
        capture_output=True,
        text=True,
    )


def test_cli_reads_the_price_and_refuses_one_that_is_no_number(tmp_path):
    gold = {**GOLD.as_json(), "price": 348}
    done = run_firewall(tmp_path, [{"name": "p", "text": "pay $348.00", "gold": gold}])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "name": "p",
        "admitted": False,
        "findings": [{"rule": "gold_price", "text": "$348.00", "canonical": "$348.00 → 348 ≈ 348"}],
    }
    bad = run_firewall(tmp_path, [{"name": "p", "text": "ok", "gold": {"price": "348"}}])
    assert bad.returncode == 2 and bad.stdout == ""
    assert "case 'p'" in bad.stderr and "gold.price" in bad.stderr


# -- the analyst gives the firewall the gold variant's price
def listing(options, pricing):
    from shared.runtime.shopsim.product import Product

    return Product(
        asin="B0TESTPRC1", title="Kalix Nova AB123 kettle", brand="Kalix", category="kettle",
        attributes=(), bullets=(), description="", options=options, pricing=pricing,
    )  # fmt: skip


def gold_task(gold_options):
    from shared.runtime.shopsim.task import Task

    return Task(
        task_id="task-000007", split="train", instruction="", instruction_simple="",
        attributes=(), instruction_options=(), price_upper=None, persona={},
        gold_asin="B0TESTPRC1", gold_title="Kalix Nova AB123 kettle", gold_category="kettle",
        gold_options=gold_options,
    )  # fmt: skip


def test_the_gold_price_is_the_listed_price_of_the_gold_option():
    from services.analyst.trace import gold_price
    from shared.runtime.shopsim.product import Catalog

    # the selected size carries its own price in the listing: the gold variant costs that
    priced = listing((("size", (("small", 10.0), ("large", 20.0))),), (10.0, 20.0))
    assert gold_price(gold_task({"size": "large"}), Catalog([priced])) == 20.0
    # one listing price and no options: that price
    single = listing((), (15.0,))
    assert gold_price(gold_task({}), Catalog([single])) == 15.0
    # a gold product the catalogue lacks has no price to guard
    assert gold_price(gold_task({}), Catalog([])) is None


def test_the_rules_analysts_cards_carry_the_gold_price_to_the_firewall():
    from services.analyst.rules_backend import AnalysisInput, analyze
    from tests.analyst.support import failed_traces, small_env

    env = small_env()
    trace = failed_traces(env, n=4)[0]
    card = analyze(AnalysisInput(env=env, trajectory=trace, bank=[], round=0, seed=1))
    gold = GoldFacts.from_json(card.privileged_audit["firewall_gold"])
    product = env.world.catalog[env.task(trace.task_id).gold_asin]
    listed = set(product.pricing) | {price for _, values in product.options for _, price in values}
    assert gold.price in listed  # one of the gold product's listed prices
    assert "gold_price" in {f.rule for f in find_leaks(f"pay ${gold.price:.2f}", gold=gold)}
