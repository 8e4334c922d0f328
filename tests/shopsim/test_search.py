"""Search: tokenizer, determinism, tie-break, top-k, both engines."""

from __future__ import annotations

import pytest

from shared.shopsim.catalog import generate_catalog
from shared.shopsim.product import Catalog, Product
from shared.shopsim.search import Fts5Index, TantivyIndex, build_index
from shared.shopsim.search_text import model_text, search_tokens


def test_tokens() -> None:
    assert search_tokens("无线降噪耳机 USB3.0，64G") == (
        "无线", "线降", "降噪", "噪耳", "耳机", "usb3.0", "64g",
    )  # fmt: skip
    assert search_tokens("Ｈeadphones headphones  black") == ("headphones", "black")
    assert search_tokens("盘") == ("盘",)
    assert model_text("Sonix Aero HX420 headphones, ipx7 waterproof") == "hx420 ipx7"


def _twin(asin: str) -> Product:
    return Product(asin, "same title here", "b", "x › y", ("a",), (), "", (), (1.0,))


@pytest.mark.parametrize("engine", ["tantivy", "fts5"])
def test_ties_break_by_product_id(engine: str) -> None:
    catalog = Catalog([_twin(f"B0{n:08d}") for n in (5, 3, 9, 1, 7)])
    index = build_index(catalog, engine)
    order = [catalog.products[p].asin for p in index.search("same title")]
    assert order == sorted(order)


def test_top_k_and_empty_queries() -> None:
    generated = generate_catalog(1500, 3)
    index = TantivyIndex(generated.catalog)
    assert len(index.search("black white navy blue")) == 150
    assert len(index.search("black", k=7)) == 7
    assert index.search("") == [] and index.search("!!!") == []
    assert index.search("zzqqxx") == []


def test_ties_at_the_cutoff_are_resolved_deterministically() -> None:
    catalog = Catalog([_twin(f"B0{n:08d}") for n in range(400, 0, -1)])
    index = TantivyIndex(catalog)
    hits = [catalog.products[p].asin for p in index.search("same", k=150)]
    assert hits == sorted(p.asin for p in catalog.products)[:150]


def test_search_is_deterministic_and_engines_agree_on_titles() -> None:
    generated = generate_catalog(1200, 4)
    first, second = TantivyIndex(generated.catalog), TantivyIndex(generated.catalog)
    reference = Fts5Index(generated.catalog)
    for product in generated.catalog.products[::97]:
        query = product.title
        assert first.search(query) == second.search(query)
        position = generated.catalog.position(product.asin)
        assert first.search(query)[0] == position
        assert reference.search(query)[0] == position


def test_unknown_engine() -> None:
    with pytest.raises(ValueError, match="unknown search engine"):
        build_index(Catalog([]), "lucene")


def test_memoized_field_tokens_equal_whole_field_tokens() -> None:
    from shared.shopsim.search import _FieldTokenizer
    from shared.shopsim.search_text import FIELDS, tokenized_fields

    tokenizer = _FieldTokenizer()
    for product in generate_catalog(600, 9).catalog:
        fields = tokenizer.fields(product)
        whole = tokenized_fields(product)
        assert [set(text.split()) for text in fields] == [set(whole[name]) for name in FIELDS]


def test_top_k_equals_the_prefix_of_the_exhaustive_ranking() -> None:
    """Families share most fields, so scores tie often: the top 150 must still be exactly
    the first 150 of the full ranking by (score desc, product id asc)."""
    generated = generate_catalog(3000, 11)
    index = TantivyIndex(generated.catalog)
    everything = len(generated.catalog)
    for product in generated.catalog.products[::250]:
        noun = product.category.split(" › ")[-1]
        for query in (noun, f"{noun} {product.attributes[2]}", product.title):
            assert index.search(query, 150) == index.search(query, everything)[:150]


def test_result_cache_is_exact_and_bounded() -> None:
    generated = generate_catalog(800, 12)
    cached = TantivyIndex(generated.catalog, cache_size=3)
    cold = TantivyIndex(generated.catalog, cache_size=0)
    queries = ["black", "white", "navy blue", "black", "sky blue", "BLACK", "black"]
    for query in queries:
        result = cached.search(query)
        assert result == cold.search(query)
        result.clear()  # callers may mutate what they get back
        assert cached.search(query) == cold.search(query)
    assert len(cached._cache) <= 3
