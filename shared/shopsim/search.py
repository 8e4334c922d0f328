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
from collections import OrderedDict
from typing import Protocol

from shared.shopsim.product import Catalog, Product
from shared.shopsim.search_text import FIELD_WEIGHTS, FIELDS, model_text, search_tokens

SEARCH_VERSION = "shopsim-multifield-bm25-v1"
TOP_K = 150
MAX_QUERY_TOKENS = 64


class SearchIndex(Protocol):
    engine: str
    build_seconds: float

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        """Catalogue positions of the top `k` products for `query`, best first."""
        ...


class _FieldTokenizer:
    """Search tokens of a product's seven fields, memoized where products share text.

    Equal, as token sets, to tokenizing `search_text.product_fields` whole: brands,
    categories, attribute lists, option lists and bullets repeat across products and are
    tokenized once (pieces are split on `;`, which no token spans); only the title is
    tokenized per product.
    """

    def __init__(self) -> None:
        self._pieces: dict[str, tuple[str, ...]] = {}
        self._joined: dict[tuple[str, ...], str] = {}

    def _piece(self, text: str) -> tuple[str, ...]:
        found = self._pieces.get(text)
        if found is None:
            found = self._pieces[text] = search_tokens(text)
        return found

    def _join(self, pieces: tuple[str, ...]) -> str:
        found = self._joined.get(pieces)
        if found is None:
            merged: dict[str, None] = {}
            for piece in pieces:
                for part in piece.split(";"):
                    merged.update(dict.fromkeys(self._piece(part)))
            found = self._joined[pieces] = " ".join(merged)
        return found

    def fields(self, product: Product) -> list[str]:
        options: list[str] = []
        for axis, entries in sorted(product.options, key=lambda item: str(item[0])):
            options.append(axis)
            options.extend(value for value, _ in entries if value)
        return [
            " ".join(search_tokens(product.title)),
            self._join((product.brand,)),
            self._join((product.category,)),
            model_text(product.title),
            self._join(product.attributes),
            self._join(tuple(options)),
            self._join(product.bullets),
        ]


def _asin_ranks(catalog: Catalog) -> list[int]:
    order = sorted(range(len(catalog)), key=lambda position: catalog.products[position].asin)
    ranks = [0] * len(catalog)
    for rank, position in enumerate(order):
        ranks[position] = rank
    return ranks


class TantivyIndex:
    """An in-memory tantivy index. Documents go in in product-id order, so in the usual single
    segment a document id is the id's rank; tantivy keeps the lower document id among equal
    scores at the cut-off, which is then exactly the reference's tie-break (a test pins it).
    With several segments (a writer heap too small for the catalogue) the search widens its
    window until no tie straddles the cut-off instead."""

    engine = "tantivy"

    def __init__(
        self, catalog: Catalog, *, heap_bytes: int = 1_500_000_000, cache_size: int = 4096
    ) -> None:
        import tantivy

        started = time.perf_counter()
        # Exact result cache keyed by the query's tokens: siblings of a GRPO group and retries
        # repeat queries. 0 disables it (the speed benchmark measures cold queries).
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[tuple[str, ...], int], list[int]] = OrderedDict()
        self._tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        for name in FIELDS:
            # Tokens arrive pre-split and lower-cased; frequencies, no positions.
            builder.add_text_field(name, tokenizer_name="whitespace", index_option="freq")
        builder.add_unsigned_field("position", stored=True)
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        writer = index.writer(heap_size=heap_bytes, num_threads=1)
        tokenizer = _FieldTokenizer()
        self._ranks = _asin_ranks(catalog)
        self._by_rank = [0] * len(catalog)
        for position, rank in enumerate(self._ranks):
            self._by_rank[rank] = position
        for position in self._by_rank:
            product = catalog.products[position]
            document = tantivy.Document()
            for name, text in zip(FIELDS, tokenizer.fields(product), strict=True):
                document.add_text(name, text)
            document.add_unsigned("position", position)
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()
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
            return self._by_rank[address.doc]  # type: ignore[attr-defined]
        return self._segment_positions[address.segment_ord][address.doc]  # type: ignore[attr-defined]

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        tokens = search_tokens(query)[:MAX_QUERY_TOKENS]
        if not tokens or k <= 0:
            return []
        if self.cache_size <= 0:
            return self._search(tokens, k)
        key = (tokens, k)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._search(tokens, k)
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return list(found)

    def _search(self, tokens: tuple[str, ...], k: int) -> list[int]:
        make = self._tantivy.Query
        should = self._tantivy.Occur.Should
        clauses = [
            (should, make.boost_query(make.term_query(self._schema, name, token), weight))
            for token in tokens
            for name, weight in FIELD_WEIGHTS.items()
        ]
        compiled = make.boolean_query(clauses)
        if self._segment_positions is None:
            hits = self._searcher.search(compiled, k, count=False).hits
            ordered = sorted((-score, address.doc) for score, address in hits)
            return [self._by_rank[doc] for _, doc in ordered]
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
        tokenizer = _FieldTokenizer()
        placeholders = ", ".join("?" for _ in range(len(FIELDS) + 2))
        self._connection.executemany(
            f"INSERT INTO products(rowid, asin, {columns}) VALUES ({placeholders})",
            (
                (position, product.asin, *tokenizer.fields(product))
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
