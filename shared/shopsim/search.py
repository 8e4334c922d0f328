"""Multi-field BM25 search over the catalogue, ranked exactly as SQLite FTS5's `bm25()` ranks
with the issue's column weights (the reference's engine); top 150; ties by product id
ascending.

FTS5's bm25() (`ext/fts5/fts5_aux.c`) scores a row for a query of terms t as

    score = sum, over t in query order, of idf(t) * f * (k1 + 1) / (f + k1 * (1 - b + b * D / L))

with k1 = 1.2 and b = 0.75; idf(t) = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6, where n
counts the rows that hold t in any column; f = the sum of the column weights over t's
occurrences in the row; D = the row's token count over all columns, unweighted; L (avgdl) =
all tokens / N. A field's tokens are distinct (the tokenizer deduplicates), so f is the sum of
the weights of the fields that hold t, fixed by a 7-bit field mask, and the fraction depends
only on (mask, D). The index keeps, per term, its postings (documents in product-id order)
with a 16-bit code into a table of those fractions; a query multiplies each by the term's idf
and adds the products per document in query order: the floating-point operations FTS5
performs, in its order, so the scores are equal bit for bit (tests compare them with SQLite).
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import OrderedDict
from typing import Protocol

import numpy as np

from shared.shopsim.product import Catalog
from shared.shopsim.search_fts5 import Fts5Index
from shared.shopsim.search_text import FIELD_WEIGHTS, FIELDS, FieldTokenizer, query_tokens

SEARCH_VERSION = "shopsim-fts5-bm25-v2"
TOP_K = 150

# FTS5's constants, and the order its bm25() sums a term's column weights in (column order).
K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
_WEIGHTS = tuple(FIELD_WEIGHTS[name] for name in FIELDS)


class SearchIndex(Protocol):
    engine: str
    build_seconds: float

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        """Catalogue positions of the top `k` products for `query`, best first."""
        ...


def mask_frequency(mask: int) -> float:
    """The weighted frequency FTS5 accumulates for a term held by the fields in `mask`."""
    total = 0.0
    for field, weight in enumerate(_WEIGHTS):
        if mask >> field & 1:
            total += weight
    return total


def saturation(frequency: float, length: float, average_length: float) -> float:
    """FTS5 bm25()'s per-term factor without the idf, written as the C source writes it."""
    return (frequency * (K1 + 1.0)) / (frequency + K1 * (1 - B + B * length / average_length))


def idf(rows: int, hits: int) -> float:
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else MIN_IDF


class Bm25Index:
    """Precomputed FTS5 bm25() postings in numpy arrays (see the module docstring)."""

    engine = "bm25"
    # Documents scored at a time: 256 KiB of float64 scores, half a core's L2 cache (scoring
    # into one 1M-entry buffer cost 3x more at 1M products). Tests shrink it to cross blocks.
    block = 32_768

    def __init__(self, catalog: Catalog, *, cache_size: int = 4096) -> None:
        started = time.perf_counter()
        # numba (about 120 MiB of LLVM and a second to start) loads with the first index, not
        # with every import of the environment.
        from shared.shopsim import search_kernel

        self._kernel = search_kernel
        # Exact result cache keyed by the query's tokens: siblings of a GRPO group and retries
        # repeat queries. 0 disables it (the speed benchmark measures cold queries).
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[tuple[str, ...], int], list[int]] = OrderedDict()
        self._lock = threading.Lock()  # for the cache; the kernel allocates its own buffer
        products = catalog.products
        count = len(products)
        # Documents are numbered in product-id order, so ties keep the lower document.
        order = sorted(range(count), key=lambda position: products[position].asin)
        self._positions = np.asarray(order, dtype=np.int64)
        self._vocabulary: dict[str, int] = {}
        terms, lengths = self._tokenize(catalog, order)
        self._postings(terms, lengths.reshape(count, len(FIELDS)))
        self.build_seconds = time.perf_counter() - started

    def _tokenize(self, catalog: Catalog, order: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Every document's field term ids, concatenated, and each field's length."""
        vocabulary = self._vocabulary

        def ids(tokens: tuple[str, ...]) -> array:
            return array("i", [vocabulary.setdefault(t, len(vocabulary)) for t in tokens])

        fields = FieldTokenizer(ids).fields
        terms, lengths = array("i"), array("i")
        for position in order:
            for found in fields(catalog.products[position]):
                terms.extend(found)
                lengths.append(len(found))
        return np.frombuffer(terms, dtype=np.int32), np.frombuffer(lengths, dtype=np.int32)

    def _postings(self, terms: np.ndarray, lengths: np.ndarray) -> None:
        """Per-term postings, each with the code of its (field mask, row length) fraction."""
        count = len(lengths)
        row_lengths = lengths.sum(axis=1)
        self._documents, masks, self._hits = self._kernel.group_postings(
            terms, lengths, len(self._vocabulary)
        )
        self._offsets = np.concatenate(([0], np.cumsum(self._hits)))
        self._rows = count
        average = float(int(row_lengths.sum())) / float(count) if count else 1.0
        span = int(row_lengths.max(initial=0)) + 1
        self._codes, pairs = self._kernel.pair_codes(self._documents, masks, row_lengths, span)
        if len(pairs) > 1 << 16:
            raise ValueError(f"{len(pairs)} (field mask, row length) pairs exceed 16-bit codes")
        self._fractions = np.array(
            [saturation(mask_frequency(int(p) // span), float(p % span), average) for p in pairs],
            dtype=np.float64,
        )

    def ranked(self, query: str, k: int = TOP_K) -> list[tuple[int, float]]:
        """(catalogue position, score) of the top `k` products, best first."""
        documents, scores = self._top(query_tokens(query), k)
        return list(zip(self._positions[documents].tolist(), scores.tolist(), strict=True))

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        tokens = query_tokens(query)
        if self.cache_size <= 0:
            return self._positions[self._top(tokens, k)[0]].tolist()
        key = (tokens, k)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return list(found)
        found = self._positions[self._top(tokens, k)[0]].tolist()
        with self._lock:
            self._cache[key] = found
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return list(found)

    def _top(self, tokens: tuple[str, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Documents and scores of the top `k`, by (score desc, document asc)."""
        # A token no product holds adds idf * 0 in FTS5: nothing, so it is left out.
        found = [term for term in map(self._vocabulary.get, tokens) if term is not None]
        if not found or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        terms = np.array(found, dtype=np.int64)
        idfs = np.array([idf(self._rows, int(self._hits[term])) for term in found])
        return self._kernel.top_k(
            self._offsets[terms],
            self._offsets[terms + 1],
            idfs,
            self._documents,
            self._codes,
            self._fractions,
            self._rows,
            k,
            self.block,
        )


# "fts5" is SQLite itself: the same ranking, orders of magnitude slower (the test oracle).
ENGINES: dict[str, type[SearchIndex]] = {"bm25": Bm25Index, "fts5": Fts5Index}


def build_index(catalog: Catalog, engine: str = "bm25") -> SearchIndex:
    if engine not in ENGINES:
        raise ValueError(f"unknown search engine {engine!r}; choose one of {sorted(ENGINES)}")
    return ENGINES[engine](catalog)
