"""Multi-field BM25 search over the catalogue, ranked exactly as SQLite FTS5's `bm25()` ranks
with the reference's column weights and tokenizer (the reference's engine); top 150; ties by
product id ascending.

A query is a list of phrases (one per pre-token, see `search_text`). FTS5's bm25()
(`ext/fts5/fts5_aux.c`) scores a row as

    score = sum over phrases p, in query order, of
            idf(p) * f * (k1 + 1) / (f + k1 * (1 - b + b * D / L))

with k1 = 1.2 and b = 0.75; idf(p) = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6, where n
counts the rows holding p in some column; f = the column weight of each occurrence of p in the
row, added in column then position order; D = the row's token count over all columns,
unweighted; L (avgdl) = all tokens / N. For one-token phrases (almost all) the index keeps, per
term, its postings (documents in product-id order) with a code into a table of the fractions
for each (f, D) that occurs; a longer phrase (`usb-c`) is matched at query time over each
candidate's token stream. A query multiplies each fraction by the phrase's idf and adds the
products per document in query order: the floating-point operations FTS5 performs, in its
order, so the scores are equal bit for bit (tests compare them with SQLite).
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import OrderedDict
from typing import Protocol

import numpy as np

from shared.runtime.shopsim.product import Catalog
from shared.runtime.shopsim.search_fts5 import Fts5Index
from shared.runtime.shopsim.search_text import FIELD_WEIGHTS, FIELDS, FieldTokenizer, query_phrases

SEARCH_VERSION = "shopsim-fts5-bm25-v3"  # v3: the reference's unicode61 tokenizer
TOP_K = 150
PHRASE_CACHE = 4096  # multi-token phrases kept beyond the catalogue's own

MIN_IDF = 1e-6
_WEIGHTS = np.array([FIELD_WEIGHTS[name] for name in FIELDS], dtype=np.float64)


class SearchIndex(Protocol):
    engine: str
    build_seconds: float

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        """Catalogue positions of the top `k` products for `query`, best first."""
        ...


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
        from shared.runtime.shopsim import search_kernel

        self._kernel = search_kernel
        # Exact result cache keyed by the query's phrases: siblings of a GRPO group and retries
        # repeat queries. 0 disables it (the speed benchmark measures cold queries).
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[tuple[tuple[str, ...], ...], int], list[int]] = OrderedDict()
        self._lock = threading.Lock()  # for the caches; the kernel allocates its own buffers
        # Multi-token phrases' documents and fractions: those the catalogue's own pre-tokens
        # make are prepared at build time, others on first use (bounded, least recent out).
        self._phrases: OrderedDict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        products = catalog.products
        count = len(products)
        # Documents are numbered in product-id order, so ties keep the lower document.
        order = sorted(range(count), key=lambda position: products[position].asin)
        self._positions = np.asarray(order, dtype=np.int64)
        self._vocabulary: dict[str, int] = {}
        # Every document's token stream, kept for phrases: fields in order, tokens in order.
        self._terms, lengths = self._tokenize(catalog, order)
        lengths = lengths.reshape(count, len(FIELDS))
        self._field_starts = np.concatenate(([0], np.cumsum(lengths.ravel()))).astype(np.int64)
        self._postings(lengths)
        for phrase in self._catalogue_phrases:
            self._phrase([self._vocabulary[token] for token in phrase])
        self.build_seconds = time.perf_counter() - started

    def _tokenize(self, catalog: Catalog, order: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Every document's field term ids, concatenated, and each field's length."""
        vocabulary = self._vocabulary

        def ids(tokens: tuple[str, ...]) -> array:
            return array("i", [vocabulary.setdefault(t, len(vocabulary)) for t in tokens])

        tokenizer = FieldTokenizer(ids)
        terms, lengths = array("i"), array("i")
        for position in order:
            for found in tokenizer.fields(catalog.products[position]):
                terms.extend(found)
                lengths.append(len(found))
        self._catalogue_phrases = sorted(tokenizer.phrases)
        return np.frombuffer(terms, dtype=np.int32), np.frombuffer(lengths, dtype=np.int32)

    def _postings(self, lengths: np.ndarray) -> None:
        """Per-term postings, each with the code of its (frequency, row length) fraction."""
        count = len(lengths)
        self._row_lengths = lengths.sum(axis=1).astype(np.int64)
        self._documents, frequencies, self._hits = self._kernel.group_postings(
            self._terms, lengths, _WEIGHTS, len(self._vocabulary)
        )
        self._offsets = np.concatenate(([0], np.cumsum(self._hits)))
        self._rows = count
        self._average = float(int(self._row_lengths.sum())) / float(count) if count else 1.0
        # Number the (frequency, row length) pairs that occur; a posting keeps its pair's code.
        values, frequency_ids = np.unique(frequencies, return_inverse=True)
        span = int(self._row_lengths.max(initial=0)) + 1
        keys = frequency_ids.astype(np.int64) * span + self._row_lengths[self._documents]
        pairs, codes = np.unique(keys, return_inverse=True)
        self._codes = codes.astype(np.uint16 if len(pairs) <= 1 << 16 else np.uint32)
        saturation = self._kernel.saturation
        self._fractions = np.array(
            [saturation(values[p // span], float(p % span), self._average) for p in pairs],
            dtype=np.float64,
        )

    def ranked(self, query: str, k: int = TOP_K) -> list[tuple[int, float]]:
        """(catalogue position, score) of the top `k` products, best first."""
        documents, scores = self._top(query_phrases(query), k)
        return list(zip(self._positions[documents].tolist(), scores.tolist(), strict=True))

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        phrases = query_phrases(query)
        if self.cache_size <= 0:
            return self._positions[self._top(phrases, k)[0]].tolist()
        key = (phrases, k)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return list(found)
        found = self._positions[self._top(phrases, k)[0]].tolist()
        with self._lock:
            self._cache[key] = found
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return list(found)

    def _phrase(self, terms: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """A multi-token phrase's documents and fractions (kept; see `_phrases`)."""
        key = tuple(terms)
        with self._lock:
            found = self._phrases.get(key)
            if found is not None:
                self._phrases.move_to_end(key)
                return found
        found = self._match_phrase(terms)
        with self._lock:
            self._phrases[key] = found
            if len(self._phrases) > max(PHRASE_CACHE, len(self._catalogue_phrases)):
                self._phrases.popitem(last=False)
        return found

    def _match_phrase(self, terms: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Scan the token streams of the documents holding the phrase's rarest token."""
        rarest = min(terms, key=lambda term: self._hits[term])
        candidates = self._documents[self._offsets[rarest] : self._offsets[rarest + 1]]
        return self._kernel.phrase_postings(
            np.array(terms, dtype=np.int32),
            candidates,
            self._terms,
            self._field_starts,
            _WEIGHTS,
            self._row_lengths,
            self._average,
        )

    def _top(self, phrases: tuple[tuple[str, ...], ...], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Documents and scores of the top `k`, by (score desc, document asc)."""
        kinds, starts, ends, idfs = [], [], [], []
        phrase_documents, phrase_fractions, filled = [], [], 0
        for phrase in phrases:
            terms = [self._vocabulary.get(token) for token in phrase]
            # A phrase no product holds adds idf * 0 in FTS5: nothing, so it is left out.
            if any(term is None for term in terms):
                continue
            if len(terms) == 1:
                term = terms[0]
                kinds.append(0)
                starts.append(self._offsets[term])
                ends.append(self._offsets[term + 1])
                idfs.append(idf(self._rows, int(self._hits[term])))
                continue
            documents, fractions = self._phrase(terms)  # type: ignore[arg-type]
            if not len(documents):
                continue
            kinds.append(1)
            starts.append(filled)
            filled += len(documents)
            ends.append(filled)
            idfs.append(idf(self._rows, len(documents)))
            phrase_documents.append(documents)
            phrase_fractions.append(fractions)
        if not kinds or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return self._kernel.top_k(
            np.array(kinds, dtype=np.int8),
            np.array(starts, dtype=np.int64),
            np.array(ends, dtype=np.int64),
            np.array(idfs, dtype=np.float64),
            self._documents,
            self._codes,
            self._fractions,
            np.concatenate(phrase_documents) if phrase_documents else np.empty(0, np.int32),
            np.concatenate(phrase_fractions) if phrase_fractions else np.empty(0, np.float64),
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
