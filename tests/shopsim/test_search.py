"""Search: tokenizer, FTS5 bm25() equivalence against SQLite itself, tie-break, top-k, cache."""

from __future__ import annotations

import random
import sqlite3

import pytest

from shared.runtime.shopsim.catalog import generate_catalog
from shared.runtime.shopsim.presets import build_world
from shared.runtime.shopsim.product import Catalog, Product
from shared.runtime.shopsim.search import Bm25Index, build_index
from shared.runtime.shopsim.search_fts5 import TOKENIZER, Fts5Index
from shared.runtime.shopsim.search_text import (
    FIELDS,
    MAX_QUERY_TOKENS,
    FieldTokenizer,
    model_text,
    query_phrases,
    search_tokens,
    split_tokens,
    tokenized_fields,
)


def test_tokens() -> None:
    assert search_tokens("无线降噪耳机 USB3.0，64G") == (
        "无线", "线降", "降噪", "噪耳", "耳机", "usb3.0", "64g",
    )  # fmt: skip
    assert search_tokens("Ｈeadphones headphones  black") == ("headphones", "black")
    assert search_tokens("盘") == ("盘",)
    assert model_text("Sonix Aero HX420 headphones, ipx7 waterproof") == "hx420 ipx7"


def test_the_reference_tokenizer_splits_pre_tokens_again() -> None:
    """`unicode61 remove_diacritics 2` splits `usb-c`, `5.3`, `built-in` into two tokens each
    and keeps repeats; each query pre-token becomes one phrase."""
    assert split_tokens(search_tokens("USB-C type-c 5.3 built-in 蓝牙耳机")) == (
        "蓝牙", "牙耳", "耳机", "usb", "c", "type", "c", "5", "3", "built", "in",
    )  # fmt: skip
    assert query_phrases("usb-c 5.3 x") == (("usb", "c"), ("5", "3"), ("x",))


def _sqlite_tokens(text: str) -> list[str]:
    """SQLite's own tokens of `text` under the reference's tokenizer, in position order."""
    connection = sqlite3.connect(":memory:")
    connection.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZER}')")
    connection.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    connection.execute("INSERT INTO t(x) VALUES (?)", (text,))
    return [row[0] for row in connection.execute("SELECT term FROM v ORDER BY offset")]


def test_split_tokens_equal_sqlite_unicode61_on_every_han_character_and_separator() -> None:
    """The fast index's stage 2 is a split at `._+-/` only because unicode61 treats every Han
    character of the bigram ranges, ASCII letters and digits as token characters."""
    han = [chr(c) for c in (*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000))]
    assert _sqlite_tokens(" ".join(han)) == han
    pre = search_tokens("a.b_c+d-e/f usb-c 5.3 x_y Ünïcödé wi-fi/2.4ghz 3.5mm")
    assert _sqlite_tokens(" ".join(pre)) == list(split_tokens(pre))


def test_memoized_field_tokens_equal_whole_field_tokens() -> None:
    tokenizer = FieldTokenizer(tuple)
    for product in generate_catalog(600, 9).catalog:
        fields = tokenizer.fields(product)
        whole = tokenized_fields(product)
        assert fields == tuple(whole[name] for name in FIELDS)


def _queries(catalog: Catalog, count: int, seed: int) -> list[str]:
    """Titles, noun + attributes, brands, categories, bullet words, very common and unknown
    tokens, and a few queries past the token limit: every kind of term FTS5 has to weigh."""
    rng = random.Random(seed)
    products = catalog.products
    common = ["features", "color size", "black blue gray", "kitchen home", "set oz pocket"]
    # phrases: tokens joined by ._+-/ (and the same tokens in another order or spacing)
    common += ["usb-c", "dual usb-c case", "bluetooth 5.3", "built-in gps", "c-usb", "5 3"]
    common += ["2.4ghz tri-mode", "anti-slip", "wi-fi", "built in", "in-built", "usb c"]
    queries = [" ".join(p.title for p in rng.sample(products, 12)) for _ in range(3)]
    for _ in range(count):
        product = rng.choice(products)
        noun = product.category.split(" › ")[-1]
        attributes = rng.sample(product.attributes, min(len(product.attributes), 3))
        words = " ".join(product.attributes).split()
        queries += rng.choice(
            [
                [product.title],
                [" ".join([noun, *attributes])],
                [f"{product.brand} {noun}", product.category],
                [" ".join(rng.sample(words, min(len(words), 5))), rng.choice(common)],
                ["-".join(rng.sample(words, min(len(words), 2)))],
                [f"{noun} zzqqxx {rng.choice(common)}"],
            ]
        )
    return queries


def _assert_same_ranking(catalog: Catalog, queries: list[str], k: int = 150) -> None:
    ours, sqlite = Bm25Index(catalog, cache_size=0), Fts5Index(catalog)
    blocked = Bm25Index(catalog, cache_size=0)
    blocked.block = 257  # many score blocks, whose edges fall inside the 64-document chunks
    for query in queries:
        expected = sqlite.ranked(query, k)
        # Equal positions in equal order, and scores equal bit for bit.
        assert ours.ranked(query, k) == expected, query
        assert blocked.ranked(query, k) == expected, query
        assert ours.search(query, k) == [position for position, _ in expected]


def test_scores_and_order_equal_sqlite_fts5_bm25() -> None:
    """The index ranks as SQLite FTS5's bm25() with the column weights, to the last bit."""
    catalog = generate_catalog(3000, 7).catalog
    _assert_same_ranking(catalog, _queries(catalog, 200, 1))


def test_phrases_across_pre_tokens_and_repeats_rank_as_fts5() -> None:
    """A phrase matches inside one field wherever its tokens stand next to each other (within
    a pre-token or across two), every occurrence counts, and repeats lengthen the row."""
    titles = [
        "usb c cable",
        "type-c usb-c hub",
        "usb/c usb.c adapter",
        "c usb charger",
        "usb-c usb-c usb-c",
        "usb cable c",
        "5.3 bluetooth",
        "bluetooth 5 3",
        "3.5 jack",
        "built-in mic",
        "in built mic",
        "wi-fi router",
        "wifi router",
        "usb",
        "c",
    ]
    products = [
        Product(f"B0{n:08d}", title, "brand", "a › b", (title.split()[-1], "usb-c"), (), title,
                (), (9.0,))
        for n, title in enumerate(titles)
    ]  # fmt: skip
    catalog = Catalog(products)
    queries = ["usb-c", "c-usb", "usb.c.usb", "5.3", "3.5", "built-in", "in-built", "wi-fi",
               "usb-c 5.3 built-in", "c", "usb", "type-c usb-c", "usb-cable"]  # fmt: skip
    _assert_same_ranking(catalog, queries, k=20)


def test_chinese_records_rank_as_fts5() -> None:
    words = ["无线", "降噪", "耳机", "蓝牙", "运动", "防水", "长续航", "头戴式", "入耳式", "黑色"]
    rng = random.Random(3)
    products = []
    for n in range(300):
        picked = rng.sample(words, 4)
        products.append(
            Product(
                f"B0{n:08d}",
                f"{''.join(picked)} X{n % 7}0{n % 3}",
                rng.choice(["声阔", "漫步者", "Sonix"]),
                "电子 › 音频 › 耳机",
                tuple(rng.sample(words, 3)),
                (f"{rng.choice(words)}，{rng.choice(words)}",),
                "",
                (("颜色", (("黑色", None), ("白色", None))),),
                (199.0,),
            )
        )
    catalog = Catalog(products, language="zh")
    queries = ["无线降噪耳机", "黑色 头戴式", "声阔 长续航 运动", "x303", "电子", "白"]
    queries += ["".join(rng.sample(words, 3)) for _ in range(40)]
    _assert_same_ranking(catalog, queries, k=60)


@pytest.mark.slow
def test_rankings_equal_sqlite_fts5_on_20k_products() -> None:
    catalog = generate_catalog(20_000, 5).catalog
    _assert_same_ranking(catalog, _queries(catalog, 400, 2))


def test_a_repeated_token_counts_each_occurrence() -> None:
    """`c` twice in one title weighs 3.0 + 3.0 (and lengthens the row): the twice-c product
    ranks first for `c` though an otherwise equal product with one `c` has a shorter row."""
    twice = Product("B000000002", "usb-c type-c", "b", "x › y", (), (), "", (), (1.0,))
    once = Product("B000000001", "usb-c typec", "b", "x › y", (), (), "", (), (1.0,))
    catalog = Catalog([once, twice])
    assert Bm25Index(catalog).search("c") == [1, 0]
    assert Fts5Index(catalog).search("c") == [1, 0]


def _twin(asin: str) -> Product:
    return Product(asin, "same title here", "b", "x › y", ("a",), (), "", (), (1.0,))


@pytest.mark.parametrize("engine", ["bm25", "fts5"])
def test_ties_break_by_product_id(engine: str) -> None:
    catalog = Catalog([_twin(f"B0{n:08d}") for n in (5, 3, 9, 1, 7)])
    index = build_index(catalog, engine)
    order = [catalog.products[p].asin for p in index.search("same title")]
    assert order == sorted(order)


@pytest.mark.parametrize("block", [32_768, 100])
def test_ties_at_the_cutoff_are_resolved_deterministically(block: int) -> None:
    catalog = Catalog([_twin(f"B0{n:08d}") for n in range(400, 0, -1)])
    index = Bm25Index(catalog)
    index.block = block
    hits = [catalog.products[p].asin for p in index.search("same", k=150)]
    assert hits == sorted(p.asin for p in catalog.products)[:150]


def test_top_k_and_empty_queries() -> None:
    index = Bm25Index(generate_catalog(1500, 3).catalog)
    assert len(index.search("black white navy blue")) == 150
    assert len(index.search("black", k=7)) == 7
    assert index.search("") == [] and index.search("!!!") == []
    assert index.search("zzqqxx") == [] and index.search("black", k=0) == []
    assert Bm25Index(Catalog([])).search("black") == []


def test_the_query_cap_is_far_above_real_queries_and_cuts_only_abuse() -> None:
    """The cap guards against abuse only: the longest plausible query (a title plus every
    attribute, options and category of a paper-preset product) stays under a tenth of it."""
    catalog = build_world("test").catalog
    longest = max(
        len(search_tokens(" ".join([p.title, *p.attributes, p.category, p.brand]))) for p in catalog
    )
    assert longest * 10 < MAX_QUERY_TOKENS
    index = Bm25Index(catalog, cache_size=0)
    filler = " ".join(f"zz{n}" for n in range(MAX_QUERY_TOKENS))
    assert index.search(f"{filler} black") == []  # past the cap: not searched
    assert index.search(f"{filler[:5000]} black") == index.search("black")


def test_top_k_equals_the_prefix_of_the_exhaustive_ranking() -> None:
    """Families share most fields, so scores tie often: the top 150 must still be exactly
    the first 150 of the full ranking by (score desc, product id asc)."""
    generated = generate_catalog(3000, 11)
    index = Bm25Index(generated.catalog)
    index.block = 1000
    everything = len(generated.catalog)
    for product in generated.catalog.products[::250]:
        noun = product.category.split(" › ")[-1]
        for query in (noun, f"{noun} {product.attributes[2]}", product.title):
            full = index.ranked(query, everything)
            assert index.ranked(query, 150) == full[:150]
            keys = [(-score, generated.catalog.products[p].asin) for p, score in full]
            assert keys == sorted(keys)


def test_a_title_finds_its_product_first() -> None:
    generated = generate_catalog(1200, 4)
    first, second = Bm25Index(generated.catalog), Bm25Index(generated.catalog)
    for product in generated.catalog.products[::97]:
        assert first.search(product.title) == second.search(product.title)
        assert first.search(product.title)[0] == generated.catalog.position(product.asin)


def test_unknown_engine() -> None:
    with pytest.raises(ValueError, match="unknown search engine"):
        build_index(Catalog([]), "lucene")


def test_result_cache_is_exact_and_bounded() -> None:
    generated = generate_catalog(800, 12)
    cached = Bm25Index(generated.catalog, cache_size=3)
    cold = Bm25Index(generated.catalog, cache_size=0)
    queries = ["black", "white", "navy blue", "black", "sky blue", "BLACK", "black"]
    for query in queries:
        result = cached.search(query)
        assert result == cold.search(query)
        result.clear()  # callers may mutate what they get back
        assert cached.search(query) == cold.search(query)
    assert len(cached._cache) <= 3
