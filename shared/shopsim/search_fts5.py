"""The reference's own engine: SQLite FTS5 ranked by `bm25()` with the column weights.

It scores every row an OR query matches (68 ms p99 at 20k products, see docs/shopsim.md), so
it is not the environment's engine: it is the oracle that `search.Bm25Index` is tested
against, and the baseline of `benchmarks/env_speed.py --compare-engines`. Its documents are
the same token lists (space-joined; the tokenizer keeps `._+-/` inside tokens as ours does).
"""

from __future__ import annotations

import sqlite3
import time

from shared.shopsim.product import Catalog
from shared.shopsim.search_text import FIELD_WEIGHTS, FIELDS, FieldTokenizer, query_tokens


class Fts5Index:
    """SQLite FTS5, `ORDER BY bm25(...) ASC, asin ASC`: the reference's ranking, slowly."""

    engine = "fts5"

    def __init__(self, catalog: Catalog) -> None:
        started = time.perf_counter()
        self._connection = sqlite3.connect(":memory:", check_same_thread=False)
        columns = ", ".join(FIELDS)
        self._connection.execute(
            f"CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, {columns}, "
            "tokenize=\"unicode61 tokenchars '._+-/'\")"
        )
        tokenizer = FieldTokenizer(" ".join)
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
        # bm25() is negative (better is smaller); the score reported is its negation.
        self._sql = (
            f"SELECT rowid, -bm25(products, {weights}) AS score FROM products "
            "WHERE products MATCH ? ORDER BY score DESC, asin ASC LIMIT ?"
        )
        self.build_seconds = time.perf_counter() - started

    def ranked(self, query: str, k: int) -> list[tuple[int, float]]:
        """(catalogue position, score) of the top `k` products, best first."""
        tokens = query_tokens(query)
        if not tokens or k <= 0:
            return []
        match = " OR ".join(f'"{token}"' for token in tokens)
        return [(row[0], row[1]) for row in self._connection.execute(self._sql, (match, k))]

    def search(self, query: str, k: int = 150) -> list[int]:
        return [position for position, _ in self.ranked(query, k)]
