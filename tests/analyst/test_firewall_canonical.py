"""The firewall reads text the way an agent would (issue 31, "one canonical form across
scripts, numbers and spellings"): each kind the issue names, with a leak it must stop and
ordinary advice it must admit. The gold records and texts are written here from the issue's
rules; expected verdicts come from those rules, never from running the firewall.
"""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from shared.runtime.leak import GoldFacts, canonical, find_leaks, reason
from shared.runtime.leak.catalog import CatalogIndex

# An English gold: a vacuum bought, cordless sticks and uprights seen on the way.
VACUUM = GoldFacts(
    task_id="task-000318",
    goal_title="Shark Aurora KX720 Cordless Stick Vacuum, Forest Green, Aluminum Wand",
    purchase_title="Shark Aurora KX720 Cordless Stick Vacuum, Forest Green, Aluminum Wand",
    visited_titles=(
        "Dyson V8 Origin Cordless Stick Vacuum, Nickel",
        "Bissell CleanView Upright Vacuum Cleaner, Titanium",
        "Pixel Home Cordless Stick Vacuum, Slate",
    ),
    brands_seen=("Shark", "Dyson", "Bissell", "Pixel"),
    gold_options=("Forest Green", "Aluminum", "King"),
    product_ids=("B0D4KX7R2M", "B07QWE2Z9Y"),
    price=129.0,
)
# A Chinese gold: a phone from a Chinese brand.
PHONE = GoldFacts(
    goal_title="小米 红米 Note 13 智能手机 午夜黑",
    brands_seen=("小米", "Sony"),
    gold_options=("午夜黑",),
    product_ids=("B0C9PHONE1",),
)
# A gold bought among hiking boots: every title seen sells them.
BOOTS = GoldFacts(
    goal_title="Merrell Moab 3 Waterproof Hiking Boots for Women",
    visited_titles=(
        "Columbia Newton Ridge Hiking Boots for Women",
        "Keen Targhee Waterproof Hiking Boots for Women",
    ),
    brands_seen=("Merrell", "Columbia", "Keen"),
)


def rules(text: str, gold: GoldFacts = VACUUM) -> set[str]:
    return {finding.rule for finding in find_leaks(text, gold=gold)}


# -- numbers a reader computes: the price within the stated tolerance (cents exact; a whole
#    amount is the price rounded to the unit either way; a bound is the request's ceiling)
@pytest.mark.parametrize(
    ("text", "price"),
    [
        ("the one-twenty-nine one", 129.0),  # spoken in pairs: 129
        ("twelve ninety-nine at checkout", 12.99),  # spoken in pairs: 12.99
        ("it costs five under 100", 95.0),  # arithmetic
        ("twenty more than 40 dollars", 60.0),
        ("一百减五块的那款", 95.0),  # Chinese "M minus N"
        ("pay 100 minus 1", 99.0),
        ("1 099,50 € at most", 1099.5),  # a space for thousands, a comma for cents
        ("1\u202f099.50 USD", 1099.5),  # a thin space
        ("about 60 bucks", 59.99),  # rounded to the unit
        ("59 dollars", 59.99),  # or cut to it
        ("just under 60", 59.99),  # a cent under
        ("不到60块", 59.99),
    ],
)
def test_a_price_a_reader_computes_is_the_gold_price(text, price):
    assert "gold_price" in rules(text, replace(VACUUM, price=price))


@pytest.mark.parametrize(
    ("text", "price"),
    [
        ("a sale price beats three coupons", 3.0),  # a number word as a determiner
        ("buy two and compare", 2.0),
        ("keep under $60 when the request says so", 59.99),  # a bound, not the price
        ("about 61 bucks", 59.99),  # past the unit
        ("five under 100 steps", 94.0),  # 95, not 94
        ("1 099,50 € at most", 1099.0),  # cents make another amount
        ("sizes run from 36 to 46", 46.0),  # a bare small number is any number
    ],
)
def test_other_numbers_are_not_the_price(text, price):
    assert "gold_price" not in rules(text, replace(VACUUM, price=price))


# -- the same name in another script or spelling
@pytest.mark.parametrize(
    ("text", "gold", "rule"),
    [
        ("シャークを優先する", VACUUM, "gold_brand"),  # Shark in katakana
        ("ダイソンは避ける", VACUUM, "gold_brand"),  # Dyson in katakana
        ("优先选择索尼的产品", PHONE, "gold_brand"),  # Sony in Chinese characters
        ("prefer Xiaomi phones", PHONE, "gold_brand"),  # 小米 in pinyin
        ("prefer xiao-mi phones", PHONE, "gold_brand"),
        ("pick the #228B22 swatch", VACUUM, "gold_option"),  # Forest Green as its CSS hex
        ("pick 228b22", VACUUM, "gold_option"),
        ("choose the Aluminium wand", VACUUM, "gold_option"),  # UK spelling of Aluminum
        ("set Frst Green", VACUUM, "gold_option"),  # an abbreviated word
        ("choose Forest-Grn", VACUUM, "gold_option"),
        ("prefer P1xel", VACUUM, "gold_brand"),  # leetspeak, 1 read as i
        ("prefer Bi55e11", VACUUM, "gold_brand"),  # and 1 read as l
    ],
)
def test_a_name_in_another_script_or_spelling_is_a_leak(text, gold, rule):
    assert rule in rules(text, gold)


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        ("サインを確認してから購入する", VACUUM),  # katakana that sounds like no brand
        ("先用商品类型和预算搜索，再核对颜色。", PHONE),
        ("三年保修的商品优先", PHONE),  # san nian: not suo ni
        ("set the colour before buying", VACUUM),  # a spelling of an ordinary word
        ("a green option is fine if asked", VACUUM),  # a colour word alone
        ("the hex code on the page is not the colour name", VACUUM),
        ("compare 3 pixels of the thumbnail", VACUUM),
    ],
)
def test_other_scripts_and_spellings_without_the_name_are_admitted(text, gold):
    assert not find_leaks(text, gold=gold), find_leaks(text, gold=gold)


# -- parts of identifiers: a 4+ run no other id of the catalog holds; a code's parts
@pytest.mark.parametrize(
    "text",
    [
        "open B0D 4KX 7R2M",  # an id in three pieces
        "the id ends in 7R2M",  # its last four characters
        "b zero d4kx7r2m",  # a zero spelled out
        "the model 720 is the one",  # a model code's digits alone
        "it begins with KX and ends with 720",  # a code split by words
        "the Aurora one",  # the product line's distinctive word
        "prefer the aurora model",
    ],
)
def test_parts_of_identifiers_are_leaks(text):
    assert rules(text) & {"product_id", "gold_model_number", "gold_line"}, text


def test_a_fragment_counts_as_whole_tokens_not_across_the_middle_of_words():
    gold = GoldFacts(product_ids=("B0XT3CAQ9Z",))
    assert not find_leaks("Compare at most 3 candidates", gold=gold)  # mos|t3ca|ndidates
    assert "product_id" in rules("it ends in 3CA Q9Z", gold)


def test_a_fragment_is_measured_against_the_catalog():
    # the last four characters are shared by another product of this catalog: not distinctive
    catalog = CatalogIndex.build(VACUUM.titles, [*VACUUM.product_ids, "B0AAAA7R2M"])
    assert "product_id" not in rules("the id ends in 7R2M", replace(VACUUM, catalog=catalog))
    # and digits a catalog's titles share are no model's digits
    catalog = CatalogIndex.build([*VACUUM.titles, "Lamp 720 lumens", "Fan 720 rpm"], [])
    assert "gold_model_number" not in rules("720 is fine", replace(VACUUM, catalog=catalog))


@pytest.mark.parametrize(
    "text",
    [
        "the id has 10 characters; read it from the page",
        "720p video is not a requirement",  # another token
        "a kx model is any model",  # the letters alone
        "read the aurora of the screen",  # an ordinary word, not written as a name
    ],
)
def test_other_numbers_letters_and_words_are_not_identifier_parts(text):
    assert not find_leaks(text, gold=VACUUM), find_leaks(text, gold=VACUUM)


# -- short hidden options and distinctive option words
@pytest.mark.parametrize("text", ["pick king", "the King size", "select KING"])
def test_a_short_option_the_text_chooses_is_a_leak(text):
    assert "gold_option" in rules(text)


@pytest.mark.parametrize("text", ["king of the hill queries win", "a king-sized budget"])
def test_a_short_option_word_in_ordinary_prose_is_admitted(text):
    assert "gold_option" not in rules(text)


def test_a_distinctive_word_of_an_option_written_as_a_name_is_a_leak():
    gold = GoldFacts(gold_options=("Lagoon Teal",))
    assert "gold_option" in rules("choose Lagoon", gold)
    assert "gold_option" not in rules("avoid the lagoon of results", gold)


# -- brand words that are ordinary words: a brand context both ways
@pytest.mark.parametrize(
    "text",
    [
        "Shark, that is the brand to filter on.",  # the start of a sentence about brands
        "Shark vacuum first",  # a product noun follows
        "prefer shark",  # a word of choosing
        "When two tie, Shark wins.",  # capitalized inside a sentence
    ],
)
def test_a_brand_that_is_an_ordinary_word_in_a_brand_context_is_a_leak(text):
    assert "gold_brand" in rules(text)


def test_only_the_sentence_holding_the_word_decides_whether_it_is_about_brands():
    gold = replace(VACUUM, brands_seen=("Beats",))
    assert "gold_brand" not in rules(
        "Check the brand filter. Beats per minute do not matter.", gold
    )
    assert "gold_brand" in rules("Check the filter. Beats is the brand to pick.", gold)


@pytest.mark.parametrize(
    "text",
    [
        "a sale price beats three coupons",
        "count the beats per minute",
        "Beats per minute do not matter here.",
        "a shark of a deal is still checked against the budget",
    ],
)
def test_a_brand_word_used_as_the_word_is_admitted(text):
    gold = replace(VACUUM, brands_seen=(*VACUUM.brands_seen, "Beats"))
    assert "gold_brand" not in rules(text, gold)


# -- category words from the catalog keep category language safe
@pytest.mark.parametrize(
    "text",
    [
        "search hiking boots for women with the size",
        "waterproof hiking boots: check the size chart",
        "running shoes and noise cancelling headphones are categories",
    ],
)
def test_category_language_is_not_a_copied_title(text):
    assert not find_leaks(text, gold=BOOTS), find_leaks(text, gold=BOOTS)


def test_a_copied_run_of_distinctive_title_words_is_still_a_leak():
    assert "gold_title" in rules("moab 3 waterproof hiking", BOOTS)
    assert "gold_line" in rules("the Targhee one", BOOTS)


# -- the reason: one function, and the CLI shows the canonical form that matched
def test_the_reason_names_the_reading_that_matched():
    (finding,) = [
        f for f in find_leaks("シャークを優先する", gold=VACUUM) if f.rule == "gold_brand"
    ]
    assert finding.text == "Shark"
    assert "シャーク" in finding.reading and "shark" in finding.reading
    assert reason(finding) == f"gold_brand: 'Shark' ({finding.reading})"
    (plain,) = find_leaks("prefer Dyson", gold=VACUUM)
    assert reason(plain) == "gold_brand: 'Dyson' (dyson)"  # read as written: its folded form


def test_the_cli_prints_the_canonical_form(tmp_path):
    path = tmp_path / "cases.json"
    gold = VACUUM.as_json()
    cases = [{"name": "kana", "text": "シャークを優先する", "gold": gold}]
    path.write_text(json.dumps(cases), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "analyst", "firewall", str(path), "--json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    line = json.loads(out)
    assert line["admitted"] is False
    (brand,) = [f for f in line["findings"] if f["rule"] == "gold_brand"]
    assert brand["text"] == "Shark" and "シャーク" in brand["canonical"]


def test_the_contract_catalog_is_read_field_by_field():
    catalog = CatalogIndex.from_json(
        [
            {"product_id": "B0AAAA7R2M", "title": "Lamp Nova desk lamp", "category": "Lighting"},
            {"product_id": "B0BBBB1111", "title": "Lamp Vela floor lamp"},
            {"title": "Lamp Orla"},  # no id
            {"product_id": "B0CCCC2222"},  # no title
            {},
        ]
    )
    assert catalog.title_count == 3
    assert catalog.title_frequency["lamp"] == 3 and catalog.title_frequency["nova"] == 1
    assert catalog.product_ids == {"b0aaaa7r2m", "b0bbbb1111", "b0cccc2222"}
    assert "lighting" in catalog.category_words
    assert catalog.is_common("lamp") and not catalog.is_common("nova")
    for bad in ({"product_id": "B0"}, ["B0AAAA7R2M"], [{"title": "x"}, "y"]):
        with pytest.raises(ValueError, match=r"gold\.catalog"):
            CatalogIndex.from_json(bad)


def test_a_catalog_without_the_gold_id_still_measures_its_fragments():
    others = CatalogIndex.build([], ["B0ZZZZZZ7R2M"])  # the gold's id is not in it
    gold = replace(VACUUM, catalog=others)
    assert "product_id" not in rules("the id ends in 7R2M", gold)  # another id holds 7R2M
    assert "product_id" in rules("the id ends in KX7R", gold)  # no other id holds KX7R


def test_the_contract_takes_an_optional_catalog():
    data = {
        **VACUUM.as_json(),
        "catalog": [{"product_id": "B0AAAA7R2M", "title": "Lamp", "category": "Lighting"}],
    }
    gold = GoldFacts.from_json(data)
    assert gold.catalog is not None and "b0aaaa7r2m" in gold.catalog.product_ids
    assert "catalog" not in gold.as_json()
    with pytest.raises(ValueError, match=r"gold\.catalog"):
        GoldFacts.from_json({"catalog": "all of it"})


@pytest.mark.parametrize("gold", [VACUUM, PHONE, BOOTS, replace(VACUUM, price=59.99)])
def test_the_projects_ordinary_advice_is_admitted_under_these_golds_too(gold):
    from tests.analyst.test_firewall import SAFE

    blocked = {text: found for text in SAFE if (found := find_leaks(text, gold=gold))}
    assert not blocked, blocked


def test_the_analyst_measures_distinctiveness_against_the_worlds_catalog():
    from services.analyst.trace import catalog_index, gold_facts, read_trace
    from tests.analyst.support import failed_traces, small_env

    env = small_env()
    trace = failed_traces(env, n=4)[0]
    task = env.task(trace.task_id)
    gold = gold_facts(task, read_trace(trace), catalog=env.world.catalog)
    assert gold.catalog is catalog_index(env.world.catalog)  # built once per catalog
    assert task.gold_asin.casefold() in gold.catalog.product_ids
    # the gold's category is category language of this catalog, not a distinctive word
    category_word = task.gold_category.split("›")[-1].split()[-1].casefold()
    assert gold.catalog.is_common(category_word)


@pytest.mark.parametrize(
    ("text", "brand"),
    [("Выбирайте Шарк", "Shark"), ("소니 제품을 고르세요", "Sony"), ("prefer Сони", "Sony")],
)
def test_a_latin_brand_written_in_another_alphabet_is_a_leak(text, brand):
    gold = GoldFacts(brands_seen=(brand,))
    assert {f.text for f in find_leaks(text, gold=gold)} == {brand}


def test_words_of_another_alphabet_that_sound_like_no_brand_are_admitted():
    assert not find_leaks("Сравните цены перед покупкой", gold=VACUUM)


# -- boundaries the mutation run asked for (docs/CONTRIBUTING.md, issue 31's leak run)
def test_a_fragment_at_the_start_or_written_twice_is_found_and_one_inside_a_word_is_not():
    assert "product_id" in rules("7R2M is the end of it")  # at offset 0
    assert "product_id" in rules("7R2M, not x7R2Mq")  # the last spot is inside a word
    assert "product_id" not in rules("ends in 7R2Mq")  # starts a word but ends inside it


def test_the_price_reading_names_the_amount_and_the_price():
    (finding,) = find_leaks("pay five under 100", gold=replace(VACUUM, price=95.0))
    assert finding.reading == "5 under 100 → 95 ≈ 95"


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("go with the aurora one", True),  # "one" after a determiner: a product
        ("the aurora ones sell out", True),
        ("nothing beats one good query", False),  # "one" after no determiner: a number
    ],
)
def test_one_after_a_name_is_a_product_only_after_a_determiner(text, leak):
    gold = replace(VACUUM, brands_seen=(*VACUUM.brands_seen, "Beats"))
    assert bool(rules(text, gold) & {"gold_line", "gold_brand"}) is leak


def test_a_sentence_about_brands_after_the_word_does_not_make_it_a_name():
    gold = replace(VACUUM, brands_seen=("Beats",))
    assert "gold_brand" not in rules("Beats per minute do not matter. Check the brand.", gold)


# -- a colour option translated into Chinese: read as the CSS colour CC-CEDICT glosses it as,
#    then judged as the English name is (a long option anywhere, a short one where chosen)
COLOURS = replace(
    VACUUM,
    gold_options=("Forest Green", "Navy", "Red", "Grey", "Sea Green", "Sky Blue", "Salmon"),
)


@pytest.mark.parametrize(
    ("chinese", "english", "reading"),
    [
        ("墨绿色的外观很耐看", "the forest green finish looks good",
         "墨绿色 → forest green = forest green"),
        ("选海军蓝", "pick navy blue", "海军 → navy = navy"),  # a short option chosen
        ("颜色：红色", "colour: red", "红色 → red = red"),  # after the word for colour
        ("红色款", "the red model", "红色 → red = red"),  # before an option noun
        ("红色的款式", "the red style", "红色 → red = red"),  # 的 between them
        ("优先选灰色", "prefer gray", "灰色 → gray = grey"),  # US spelling of the UK option
        ("幽绿很耐看", "dark sea green looks good", "幽绿 → dark sea green = sea green"),
        ("choose 天蓝色", "choose sky blue", "天蓝色 → sky blue = sky blue"),  # 天蓝 of 天蓝色
        ("鲑鱼色很好看", "salmon looks good", "鲑鱼色 → salmon = salmon"),  # 6 letters: anywhere
        ("海军蓝的评价多，但选红色", "navy blue is well reviewed, but pick red",
         "红色 → red = red"),  # a colour not chosen, then the gold's chosen
    ],
)  # fmt: skip
def test_a_colour_option_in_chinese_is_a_leak_as_in_english(chinese, english, reading):
    found = [f for f in find_leaks(chinese, gold=COLOURS) if f.rule == "gold_option"]
    assert [f.reading for f in found] == [reading]
    assert "gold_option" in rules(english, COLOURS)


@pytest.mark.parametrize(
    ("chinese", "english"),
    [
        ("深绿色更耐脏", "dark green hides dirt better"),  # 深绿 is dark green, not forest green
        ("海军蓝的评价很多", "navy blue has many reviews"),  # a short option not chosen
        ("红色标签表示促销", "a red label marks a sale"),  # a colour word in ordinary advice
        ("选紫色", "pick purple"),  # a colour chosen that is not the gold's
        ("选殷红", "pick dark red"),  # a short option inside another name (殷红 is dark red)
        ("小米红米手机", "xiaomi redmi phones"),  # 红 alone is no colour word (红米 is Redmi)
    ],
)
def test_a_chinese_colour_that_is_not_the_gold_option_is_admitted_as_in_english(chinese, english):
    gold = replace(COLOURS, brands_seen=("Shark",))
    assert not find_leaks(chinese, gold=gold), find_leaks(chinese, gold=gold)
    assert not find_leaks(english, gold=gold), find_leaks(english, gold=gold)


def test_the_chinese_colour_table_holds_css_colour_names_from_its_dictionary():
    import webcolors

    from shared.runtime.leak.chinese_colours import COLOUR_WORDS, colour_words

    css = set(webcolors.names("css3"))
    assert all(name.replace(" ", "") in css for names in COLOUR_WORDS.values() for name in names)
    assert COLOUR_WORDS["墨绿"] == ("dark green", "forest green")  # CC-CEDICT's two glosses
    assert all(len(word) >= 2 for word in COLOUR_WORDS)  # no single character (金额, 白天)
    (word,) = colour_words("金额不限，选墨绿色")
    assert (word.written, word.chosen) == ("墨绿色", True)


# -- a Latin name heard in kana or Chinese characters: the rules of canonical._merged and
#    SoundShape, each pinned by a name that needs it and by a near miss it must not take
@pytest.mark.parametrize(
    ("text", "brand", "leak"),
    [
        ("ビッセルを選ぶ", "Bissell", True),  # bisseru: doubled letters heard once
        ("サムスンを選ぶ", "Samsung", True),  # samusun: a final ng heard as n
        ("マノを選ぶ", "Mango", False),  # mano: an ng before a vowel keeps its g
        ("ヤマハを選ぶ", "Yamaha", True),  # a y before a vowel at the start is a consonant
        ("アマハを選ぶ", "Yamaha", False),  # so amaha is not Yamaha
        ("靴下は sock で検索する", "Shark", False),  # only kana words are read as kana
    ],
)
def test_a_name_is_heard_in_kana_by_its_consonants_in_order(text, brand, leak):
    assert bool(find_leaks(text, gold=GoldFacts(brands_seen=(brand,)))) is leak


def test_a_name_is_heard_in_chinese_characters_when_half_its_vowel_groups_agree():
    # 戴森 dai sen for Dyson: the shape tVsVn, y/ai agree (y counts as i), o/e do not: 1 of 2
    (finding,) = find_leaks("选戴森吸尘器", gold=GoldFacts(brands_seen=("Dyson",)))
    assert finding.reading == "戴森 → dai sen ≈ dyson"  # the characters' pinyin, spaced
    heard = canonical.SoundShape
    assert heard("sVn", ("y",)).heard_as(heard("sVn", ("i",)))  # y counts as i, either side
    assert heard("sVn", ("i",)).heard_as(heard("sVn", ("y",)))
    assert not heard("sVn", ("a",)).heard_as(heard("sVn", ("i",)))
    assert not heard("sVnVk", ("a", "o", "u")).heard_as(heard("sVnVk", ("a", "i", "e")))  # 1 of 3
    assert not heard("sVn", ("o",)).heard_as(heard("sVk", ("o",)))  # another shape
    # a last vowel dropped: the same shape with fewer vowel groups is compared pair by pair
    assert canonical.sound_shape("suo en").heard_as(canonical.sound_shape("sony"))


@pytest.mark.parametrize(
    ("text", "brand", "leak"),
    [
        ("选戴森吸尘器", "Dyson", True),  # dai sen: pinyin d for a Latin d
        ("选戴森吸尘器", "Tyson", False),  # a Latin t is written with pinyin t, not d
        ("我推荐这款吸尘器", "Dyson", False),  # tui jian, "recommend": t for Dyson's d
        ("我推荐这款吸尘器", "Tyson", True),  # the same shape with the same stop: heard
    ],
)
def test_chinese_characters_keep_a_latin_stops_voicing(text, brand, leak):
    """Chinese transcription writes Latin b d g with pinyin b d g and p t k with p t k, so a
    run of characters is heard as a name only with the same stops; kana and Latin spellings
    still merge the pairs (a voiced stop in a name read aloud in Latin letters is the same
    name)."""
    found = [f for f in find_leaks(text, gold=GoldFacts(brands_seen=(brand,)))]
    assert bool(found) is leak, found


def test_a_name_of_one_syllable_is_not_looked_for_in_chinese_characters():
    """Shark is one vowel group: two characters with its shape are ordinary Chinese words
    (萨克斯, sa ke si, is a saxophone: sVk, a/a agree), so it is read in kana only."""
    assert canonical.sound_shape("sa ke").heard_as(canonical.sound_shape("Shark"))
    assert not find_leaks("萨克斯风的入门款更适合新手", gold=GoldFacts(brands_seen=("Shark",)))
    assert find_leaks("シャークを選ぶ", gold=GoldFacts(brands_seen=("Shark",)))  # kana still


def test_the_catalog_reads_categories_outside_the_shopsim_vocabulary():
    from types import SimpleNamespace

    products = [
        SimpleNamespace(title="Reef Nova tank", asin="B0AAAA1111", category="Aquascaping"),
        SimpleNamespace(title="Reef Vela tank", asin="B0BBBB2222", category="Aquascaping"),
    ]
    index = CatalogIndex.of_products(products)
    assert index.title_count == 2 and index.title_frequency["reef"] == 2
    assert index.product_ids == {"b0aaaa1111", "b0bbbb2222"}
    assert "aquascaping" in index.category_words and index.is_common("aquascaping")
    data = [{"product_id": p.asin, "title": p.title, "category": p.category} for p in products]
    assert "aquascaping" in CatalogIndex.from_json(data).category_words


def test_a_word_is_common_from_one_percent_of_the_titles_and_two_at_least():
    titles = [f"Item {n} plain" for n in range(250)]  # 1 % of 250 titles is 2.5: 3 titles
    index = CatalogIndex.build([*titles[:247], *(f"Nova {t}" for t in titles[247:])], [])
    assert index.is_common("nova")  # in 3 of 250
    index = CatalogIndex.build([*titles[:248], *(f"Nova {t}" for t in titles[248:])], [])
    assert not index.is_common("nova")  # in 2 of 250
    small = CatalogIndex.build(["Nova lamp", "Nova fan", "Vela lamp", "Orla desk"], [])
    assert small.is_common("nova") and not small.is_common("vela")  # two at least
    twice = CatalogIndex.build(["Vela lamp", "Vela lamp", "Orla desk"], [])
    assert twice.title_count == 2 and not twice.is_common("vela")  # one title, listed twice


def test_a_refused_catalog_is_named_in_the_message():
    with pytest.raises(ValueError, match=r"^gold\.catalog must be a list of objects$"):
        CatalogIndex.from_json("all of it")


def test_a_capitalized_brand_after_a_capital_x_is_inside_its_sentence():
    gold = GoldFacts(brands_seen=("Beats",))
    assert "gold_brand" in rules("Through the AUX Beats wins on sound", gold)


@pytest.mark.parametrize(
    ("task_id", "text", "shown"),
    [
        ("task-000318", "see case 318", "318"),  # a number of 3+ digits, its zeros dropped
        ("task-042", "see case 042", "042"),  # a shorter one only as written with its zeros
    ],
)
def test_the_task_number_alone_is_found_and_shown_as_it_counts(task_id, text, shown):
    assert [f.text for f in find_leaks(text, gold=GoldFacts(task_id=task_id))] == [shown]
    assert not find_leaks("see case 42", gold=GoldFacts(task_id="task-042"))


def test_a_model_code_of_five_characters_counts_glued_to_other_text():
    assert "gold_model_number" in rules("the KX720s are fine")  # KX720: 5 characters


def test_a_short_css_hex_is_the_colour_it_doubles():
    gold = GoldFacts(gold_options=("Red",))
    (finding,) = find_leaks("use the #F00 swatch", gold=gold)  # #f00 is #ff0000, red
    assert finding.reading == "#ff0000 = red"


def test_a_catalog_id_written_with_separators_is_read_folded():
    # another product's id holds X7R2M once its dash is dropped: not distinctive of the gold
    catalog = CatalogIndex.build([], [*VACUUM.product_ids, "B0ZZZX7-R2M"])
    assert "product_id" not in rules("the id ends in X7R2M", replace(VACUUM, catalog=catalog))


def test_a_name_is_looked_for_in_as_many_characters_as_its_syllables_or_one_more():
    gold = GoldFacts(brands_seen=("Sony",))  # two syllables: 2 or 3 characters
    assert find_leaks("选索欧尼", gold=gold)  # suo ou ni, three characters: sVn
    assert not find_leaks("选索欧鹅尼", gold=gold)  # suo ou e ni is sVn too, but four


# -- what each finding shows: the rule, the gold term and the reading that matched (the CLI's
#    `canonical`), one per kind of reading
@pytest.mark.parametrize(
    ("text", "gold", "finding"),
    [
        ("the Aur0ra one", VACUUM, ("gold_line", "aurora", "Aur0ra → aurora")),  # leetspeak
        ("prefer P1xel", VACUUM, ("gold_brand", "Pixel", "P1xel → pixel")),
        ("open B zero D4KX7R2M", VACUUM, ("product_id", "B0D4KX7R2M", "")),  # spelled: whole id
        ("the id is 0D4KX7R2M", VACUUM,
         ("product_id", "0d4kx7r2m", "0d4kx7r2m = part of B0D4KX7R2M")),  # 9 of its 10
        ("the 720 model costs $199", VACUUM, ("gold_model_number", "720", "720 = digits of kx720")),
        ("choose Lagoon", GoldFacts(gold_options=("Lagoon Teal",)),
         ("gold_option", "lagoon", "lagoon of Lagoon Teal")),
        ("choose the Aluminium wand", VACUUM, ("gold_option", "Aluminum", "aluminium = aluminum")),
        ("choose forest green", VACUUM, ("gold_option", "Forest Green", "")),  # as written
        ("set Frst Green", VACUUM, ("gold_option", "Forest Green", "frst green = forest green")),
        ("pick king", VACUUM, ("gold_option", "King", "")),  # a short option as written
        ("prefer gray", GoldFacts(gold_options=("Grey",)), ("gold_option", "Grey", "gray = grey")),
        ("选天蓝色的", GoldFacts(gold_options=("Azure",)),
         ("gold_option", "Azure", "天蓝色 → azure = azure")),  # the whole word's own name
        ("优先小米", PHONE, ("gold_brand", "小米", "")),  # a Chinese brand as written
        ("Выбирайте Золо", GoldFacts(goal_title="Anker Zolo power bank"),
         ("gold_line", "zolo", "Золо → zolo ≈ zolo")),  # a line name that is no ordinary word
    ],
)  # fmt: skip
def test_each_finding_shows_its_gold_term_and_the_reading_that_matched(text, gold, finding):
    assert finding in {(f.rule, f.text, f.reading) for f in find_leaks(text, gold=gold)}


def test_a_code_split_by_words_is_one_finding_with_its_parts_shown():
    found = {(f.rule, f.text, f.reading) for f in find_leaks("KX first, 720 last", gold=VACUUM)}
    assert ("gold_model_number", "kx720", "kx 720 = kx720") in found
    # a one-letter part names no code: "press q, wait 30 seconds" is no Q30
    gold = GoldFacts(goal_title="Anker Soundcore Life Q30")
    assert not find_leaks("press q, wait 30 seconds", gold=gold)


def test_a_model_code_is_shown_once_at_its_longest():
    gold = GoldFacts(goal_title="Sony WH1000XM5 headphones")
    found = [f.text for f in find_leaks("get the WH1000XM5", gold=gold)]
    assert found == ["wh1000xm5"]  # not also 1000xm5 or xm5, which it holds


def test_every_option_is_checked_after_one_inside_a_longer_one():
    gold = GoldFacts(gold_options=("Midnight Blue", "Blue", "King", "XL"))
    found = {f.text for f in find_leaks("choose Midnight Blue, pick king", gold=gold)}
    assert found == {"Midnight Blue", "King"}
    assert {f.text for f in find_leaks("pick XL", gold=gold)} == {"XL"}  # two characters


def test_an_option_word_common_in_the_catalog_is_no_leak():
    catalog = CatalogIndex.build(["Nova lamp", "Nova fan", "Orla desk"], [])
    gold = GoldFacts(gold_options=("Nova Grey",), catalog=catalog)
    assert not find_leaks("choose Nova", gold=gold)
    assert "gold_option" in rules("choose Lune", GoldFacts(gold_options=("Lune Grey",)))


def test_a_fragment_is_found_past_spots_inside_words():
    assert "product_id" in rules("not x7R2Mx but 7R2M, not x7R2Mx")  # only the middle one
    gold = GoldFacts(product_ids=("B0QQ7777ZZ",))
    assert "product_id" in rules("it ends in 7 7777", gold)  # 7777 again one place on


def test_a_price_after_a_percentage_or_with_cents_in_words_is_read():
    assert "gold_price" in rules("save 20% and pay $129")
    gold = replace(VACUUM, price=129.5)
    assert "gold_price" in rules("129 dollars and 50 cents", gold)
    assert "gold_price" not in rules("129 dollars and 40 cents", gold)


@pytest.mark.parametrize(
    ("text", "price", "leak"),
    [
        ("it costs five under 100", 95.4, True),  # a computed whole amount: to the unit
        ("the one-twenty-nine one", 129.4, True),  # a spoken whole amount likewise
        ("just under 60", 59.5, False),  # 59.99 has cents: to the cent only
        ("twelve ninety-nine at checkout", 12.5, False),  # 12.99 likewise
    ],
)
def test_computed_and_spoken_amounts_keep_the_tolerance_of_written_ones(text, price, leak):
    assert ("gold_price" in rules(text, replace(VACUUM, price=price))) is leak


@pytest.mark.parametrize(
    ("text", "price", "shown"),
    [
        ("pay just under 60", 59.99, "just under 60"),
        ("the one-twenty-nine one", 129.0, "one-twenty-nine"),  # read as 129
        ("twelve ninety-nine at checkout", 12.99, "twelve ninety-nine"),  # read as 12.99
    ],
)
def test_a_computed_or_spoken_price_is_shown_whole(text, price, shown):
    found = find_leaks(text, gold=replace(VACUUM, price=price))
    assert [f.text for f in found if f.rule == "gold_price"] == [shown]


@pytest.mark.parametrize("text", ["pay 720 minus 1", "just under 720", "it costs $720"])
def test_a_code_s_digits_written_as_an_amount_are_the_amount(text):
    assert "gold_model_number" not in rules(text)


def test_an_option_of_six_characters_is_read_whole_and_by_its_distinctive_words():
    gold = GoldFacts(gold_options=("Nova XL",))  # novaxl: 6 characters, not a short option
    assert {f.text for f in find_leaks("choose Nova", gold=gold)} == {"nova"}
