"""Multi-field BM25 search over the catalogue (top 150, deterministic tie-break).

Two engines share one tokenizer (`search_text`) and one tie-break (score descending, then
product id ascending, as reference v3 orders ties):

* `tantivy` (default): per-field BM25 (Lucene idf, k1 1.2, b 0.75), weighted by field and
  summed; block-max WAND keeps top-k fast on 1M products (see docs/shopsim.md for figures).
* `fts5`: SQLite FTS5 `bm25()` with the same column weights, the reference's own scoring
  (one length normalisation over the whole row). Exact to the reference, but it scores every
  matching row, so it is for small catalogues and fidelity checks only.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Protocol

from shared.shopsim.product import Catalog, Product
from shared.shopsim.search_text import FIELD_WEIGHTS, FIELDS, product_fields, search_tokens

SEARCH_VERSION = "shopsim-multifield-bm25-v1"
TOP_K = 150
MAX_QUERY_TOKENS = 64


class SearchIndex(Protocol):
    engine: str
    build_seconds: float

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        """Catalogue positions of the top `k` products for `query`, best first."""
        ...


def _memoized_tokens() -> Callable[[str], tuple[str, ...]]:
    # Brands, categories, attribute and option strings repeat across products: tokenize once.
    cache: dict[str, tuple[str, ...]] = {}

    def tokens(text: str) -> tuple[str, ...]:
        found = cache.get(text)
        if found is None:
            found = cache[text] = search_tokens(text)
        return found

    return tokens


def _document_fields(product: Product, tokens: Callable[[str], tuple[str, ...]]) -> list[str]:
    fields = product_fields(product)
    out = []
    for name in FIELDS:
        if name in ("attributes", "bullets", "options"):
            # Per-part memoisation, then deduplication over the whole field.
            parts = (
                product.attributes
                if name == "attributes"
                else product.bullets
                if name == "bullets"
                else [fields["options"]]
            )
            merged: dict[str, None] = {}
            for part in parts:
                merged.update(dict.fromkeys(tokens(part)))
            out.append(" ".join(merged))
        else:
            out.append(" ".join(tokens(fields[name])))
    return out


def _asin_ranks(catalog: Catalog) -> list[int]:
    order = sorted(range(len(catalog)), key=lambda position: catalog.products[position].asin)
    ranks = [0] * len(catalog)
    for rank, position in enumerate(order):
        ranks[position] = rank
    return ranks


class TantivyIndex:
    """An in-memory tantivy index: one segment, document id = catalogue position."""

    engine = "tantivy"

    def __init__(self, catalog: Catalog, *, heap_bytes: int = 1_500_000_000) -> None:
        import tantivy

        started = time.perf_counter()
        self._tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        for name in FIELDS:
            # Tokens arrive pre-split and lower-cased; frequencies, no positions.
            builder.add_text_field(name, tokenizer_name="whitespace", index_option="freq")
        builder.add_unsigned_field("position", stored=True)
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        writer = index.writer(heap_size=heap_bytes, num_threads=1)
        tokens = _memoized_tokens()
        for position, product in enumerate(catalog.products):
            document = tantivy.Document()
            for name, text in zip(FIELDS, _document_fields(product, tokens), strict=True):
                document.add_text(name, text)
            document.add_unsigned("position", position)
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()
        self._ranks = _asin_ranks(catalog)
        self._segment_positions = self._map_segments(catalog)
        self.build_seconds = time.perf_counter() - started

    def _map_segments(self, catalog: Catalog) -> list[list[int]] | None:
        """None when there is one segment in insertion order (the usual case); else a map
        (segment, doc) -> position read once from the stored field."""
        searcher = self._searcher
        if searcher.num_segments == 1:
            return None
        query = self._tantivy.Query.all_query()
        hits = searcher.search(query, len(catalog), count=False).hits
        mapping: dict[int, dict[int, int]] = {}
        for _, address in hits:
            stored = searcher.doc(address)["position"][0]
            mapping.setdefault(address.segment_ord, {})[address.doc] = int(stored)
        return [[table[doc] for doc in range(len(table))] for _, table in sorted(mapping.items())]

    def _position(self, address: object) -> int:
        if self._segment_positions is None:
            return address.doc  # type: ignore[attr-defined]
        return self._segment_positions[address.segment_ord][address.doc]  # type: ignore[attr-defined]

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        tokens = search_tokens(query)[:MAX_QUERY_TOKENS]
        if not tokens or k <= 0:
            return []
        make = self._tantivy.Query
        should = self._tantivy.Occur.Should
        clauses = [
            (should, make.boost_query(make.term_query(self._schema, name, token), weight))
            for token in tokens
            for name, weight in FIELD_WEIGHTS.items()
        ]
        compiled = make.boolean_query(clauses)
        limit = k + 16
        while True:
            hits = self._searcher.search(compiled, limit, count=False).hits
            scored = [(score, self._position(address)) for score, address in hits]
            scored.sort(key=lambda item: (-item[0], self._ranks[item[1]]))
            # A tie that straddles the fetched window could hide a smaller id: widen it.
            if len(hits) < limit or len(scored) <= k or scored[k - 1][0] != scored[-1][0]:
                return [position for _, position in scored[:k]]
            limit *= 2


class Fts5Index:
    """SQLite FTS5 with `bm25()` column weights: the reference's scoring, slow on big data."""

    engine = "fts5"

    def __init__(self, catalog: Catalog) -> None:
        started = time.perf_counter()
        self._connection = sqlite3.connect(":memory:", check_same_thread=False)
        columns = ", ".join(FIELDS)
        self._connection.execute(
            f"CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, {columns}, "
            "tokenize=\"unicode61 tokenchars '._+-/'\")"
        )
        tokens = _memoized_tokens()
        placeholders = ", ".join("?" for _ in range(len(FIELDS) + 2))
        self._connection.executemany(
            f"INSERT INTO products(rowid, asin, {columns}) VALUES ({placeholders})",
            (
                (position, product.asin, *_document_fields(product, tokens))
                for position, product in enumerate(catalog.products)
            ),
        )
        self._connection.commit()
        weights = ", ".join(["0.0", *(str(FIELD_WEIGHTS[name]) for name in FIELDS)])
        self._sql = (
            f"SELECT rowid FROM products WHERE products MATCH ? "
            f"ORDER BY bm25(products, {weights}) ASC, asin ASC LIMIT ?"
        )
        self.build_seconds = time.perf_counter() - started

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        tokens = search_tokens(query)[:MAX_QUERY_TOKENS]
        if not tokens or k <= 0:
            return []
        match = " OR ".join(f'"{token}"' for token in tokens)
        return [row[0] for row in self._connection.execute(self._sql, (match, k))]


ENGINES = {"tantivy": TantivyIndex, "fts5": Fts5Index}


def build_index(catalog: Catalog, engine: str = "tantivy") -> SearchIndex:
    if engine not in ENGINES:
        raise ValueError(f"unknown search engine {engine!r}; choose one of {sorted(ENGINES)}")
    return ENGINES[engine](catalog)
