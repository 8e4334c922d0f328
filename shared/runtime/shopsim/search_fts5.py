"""The reference's own engine: SQLite FTS5 ranked by `bm25()` with the column weights.

It scores every row an OR query matches (tens of ms at 20k products, see docs/shopsim.md), so
it is not the environment's engine: it is the oracle that `search.Bm25Index` is tested
against, and the baseline of `benchmarks/env_speed.py --compare-engines`.

It is a separate transcription of the reference's search, sharing nothing with `search_text`
but the raw field texts (`product_fields`), the weights and the query cap: its own normaliser
and pre-tokenizer, and the final tokenization done by SQLite itself with the reference's
`unicode61 remove_diacritics 2`. So the equality tests catch a tokenizer error on either side.
"""

from __future__ import annotations

import re
import sqlite3
import time
import unicodedata

from shared.runtime.shopsim.product import Catalog
from shared.runtime.shopsim.search_text import (
    FIELD_WEIGHTS,
    FIELDS,
    MAX_QUERY_TOKENS,
    product_fields,
)

TOKENIZER = "unicode61 remove_diacritics 2"

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_LATIN_OR_NUMBER = re.compile(r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*")


def reference_pre_tokens(value: object) -> list[str]:
    """The reference's `search_tokens`: normalise (NFKC, casefold, currency words to 元,
    basic punctuation to spaces), Han bigrams then Latin/number runs, first occurrences."""
    text = unicodedata.normalize("NFKC", str(value or "")).casefold()
    text = text.replace("人民币", "元").replace("块钱", "元")
    text = re.sub(r"(?<=\d)\s*(?:rmb|cny|yuan)\b", "元", text)
    text = re.sub(r"\s+", " ", text)
    text = " ".join(re.sub(r"[，,。；;：:！!？?、|]+", " ", text).split())
    tokens: list[str] = []
    for run in _HAN_RUN.findall(text):
        tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    tokens.extend(_LATIN_OR_NUMBER.findall(text))
    return list(dict.fromkeys(tokens))


class Fts5Index:
    """SQLite FTS5, `ORDER BY bm25(...) ASC, asin ASC`: the reference's ranking, slowly."""

    engine = "fts5"

    def __init__(self, catalog: Catalog) -> None:
        started = time.perf_counter()
        self._connection = sqlite3.connect(":memory:", check_same_thread=False)
        columns = ", ".join(FIELDS)
        self._connection.execute(
            f"CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, {columns}, "
            f"tokenize='{TOKENIZER}')"
        )
        placeholders = ", ".join("?" for _ in range(len(FIELDS) + 2))
        self._connection.executemany(
            f"INSERT INTO products(rowid, asin, {columns}) VALUES ({placeholders})",
            (
                (position, product.asin, *self._documents(product))
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

    @staticmethod
    def _documents(product) -> list[str]:
        fields = product_fields(product)
        return [" ".join(reference_pre_tokens(fields[name])) for name in FIELDS]

    def ranked(self, query: str, k: int) -> list[tuple[int, float]]:
        """(catalogue position, score) of the top `k` products, best first."""
        tokens = reference_pre_tokens(query)[:MAX_QUERY_TOKENS]
        if not tokens or k <= 0:
            return []
        # Each pre-token is one quoted phrase; SQLite splits it with the table's tokenizer.
        match = " OR ".join(f'"{token}"' for token in tokens)
        return [(row[0], row[1]) for row in self._connection.execute(self._sql, (match, k))]

    def search(self, query: str, k: int = 150) -> list[int]:
        return [position for position, _ in self.ranked(query, k)]
