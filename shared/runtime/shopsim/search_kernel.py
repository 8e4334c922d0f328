"""The compiled loops of `search.Bm25Index`: group the catalogue's field tokens into
postings (build), find a multi-token phrase's documents (query), and accumulate a query's
postings into a score buffer, then select the top k by (score desc, document asc) (query).

numba compiles them on first use and caches the machine code beside this file. No fast-math:
each contribution is one multiply and one add, in the order FTS5's bm25() performs them, so
the sums are bit-identical to SQLite's.
"""

from __future__ import annotations

import numba
import numpy as np

CHUNK = 64  # documents tested against the heap's worst score at once
# FTS5's bm25() constants.
K1 = 1.2
B = 0.75


@numba.njit(cache=True, nogil=True)
def group_postings(
    terms: np.ndarray, lengths: np.ndarray, weights: np.ndarray, vocabulary_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-term postings from each document's field tokens (`terms`, documents in order,
    fields in order within each, `lengths[document, field]` tokens each): the documents holding
    each term (grouped by term, ascending within), the term's weighted frequency there, and
    each term's document count. The frequency adds the field's weight once per occurrence, in
    field then position order: FTS5 bm25()'s sum, in its order. A counting sort: two passes."""
    hits = np.zeros(vocabulary_size, dtype=np.int64)
    last = np.full(vocabulary_size, -1, dtype=np.int64)
    at = 0
    for document in range(lengths.shape[0]):
        for field in range(lengths.shape[1]):
            for _ in range(lengths[document, field]):
                term = terms[at]
                at += 1
                if last[term] != document:
                    last[term] = document
                    hits[term] += 1
    cursor = np.zeros(vocabulary_size, dtype=np.int64)
    total = 0
    for term in range(vocabulary_size):
        cursor[term] = total
        total += hits[term]
    documents = np.empty(total, dtype=np.int32)
    frequencies = np.zeros(total, dtype=np.float64)
    last[:] = -1
    at = 0
    for document in range(lengths.shape[0]):
        for field in range(lengths.shape[1]):
            weight = weights[field]
            for _ in range(lengths[document, field]):
                term = terms[at]
                at += 1
                if last[term] != document:
                    last[term] = document
                    documents[cursor[term]] = document
                    cursor[term] += 1
                frequencies[cursor[term] - 1] += weight
    return documents, frequencies, hits


@numba.njit(cache=True, nogil=True)
def saturation(frequency: float, length: float, average_length: float) -> float:
    """FTS5 bm25()'s per-phrase factor without the idf, written as the C source writes it."""
    return (frequency * (K1 + 1.0)) / (frequency + K1 * (1 - B + B * length / average_length))


@numba.njit(cache=True, nogil=True)
def phrase_postings(
    phrase: np.ndarray,
    candidates: np.ndarray,
    terms: np.ndarray,
    field_starts: np.ndarray,
    weights: np.ndarray,
    row_lengths: np.ndarray,
    average_length: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The documents among `candidates` (ascending; they hold one of the phrase's tokens) where
    the token sequence `phrase` occurs inside one field, and each one's bm25 fraction. Every
    occurrence adds its field's weight, in field then position order, as FTS5 counts phrase
    instances."""
    fields = weights.shape[0]
    size = phrase.shape[0]
    found = np.empty(candidates.shape[0], dtype=np.int32)
    fractions = np.empty(candidates.shape[0], dtype=np.float64)
    count = 0
    for document in candidates:
        frequency = 0.0
        for field in range(fields):
            start = field_starts[document * fields + field]
            end = field_starts[document * fields + field + 1]
            for at in range(start, end - size + 1):
                same = True
                for offset in range(size):
                    if terms[at + offset] != phrase[offset]:
                        same = False
                        break
                if same:
                    frequency += weights[field]
        if frequency > 0.0:
            found[count] = document
            fractions[count] = saturation(frequency, float(row_lengths[document]), average_length)
            count += 1
    return found[:count], fractions[:count]


@numba.njit(cache=True, nogil=True, inline="always")
def _worse(score_a: float, doc_a: int, score_b: float, doc_b: int) -> bool:
    return score_a < score_b or (score_a == score_b and doc_a > doc_b)


@numba.njit(cache=True, nogil=True)
def _sift_down(scores: np.ndarray, docs: np.ndarray, size: int, at: int) -> None:
    """Restore the heap below `at` (the worst entry at the root)."""
    while True:
        child = 2 * at + 1
        if child >= size:
            return
        if child + 1 < size and _worse(
            scores[child + 1], docs[child + 1], scores[child], docs[child]
        ):
            child += 1
        if not _worse(scores[child], docs[child], scores[at], docs[at]):
            return
        scores[at], scores[child] = scores[child], scores[at]
        docs[at], docs[child] = docs[child], docs[at]
        at = child


@numba.njit(cache=True, nogil=True)
def _offer(
    heap_scores: np.ndarray, heap_docs: np.ndarray, filled: int, score: float, document: int
) -> int:
    """Put (score, document) into the heap of the best so far if it belongs; returns the fill."""
    if filled < len(heap_scores):
        slot = filled
        while slot > 0:  # sift up
            parent = (slot - 1) // 2
            if not _worse(score, document, heap_scores[parent], heap_docs[parent]):
                break
            heap_scores[slot], heap_docs[slot] = heap_scores[parent], heap_docs[parent]
            slot = parent
        heap_scores[slot], heap_docs[slot] = score, document
        return filled + 1
    if _worse(heap_scores[0], heap_docs[0], score, document):
        heap_scores[0], heap_docs[0] = score, document
        _sift_down(heap_scores, heap_docs, filled, 0)
    return filled


@numba.njit(cache=True, nogil=True)
def top_k(
    phrase_kinds: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    idfs: np.ndarray,
    documents: np.ndarray,
    codes: np.ndarray,
    fractions: np.ndarray,
    phrase_documents: np.ndarray,
    phrase_fractions: np.ndarray,
    rows: int,
    k: int,
    block: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Documents and scores of the best `k`, best first, for a query of phrases in query
    order. A one-token phrase (kind 0) reads its term's postings, `documents[starts:ends]`
    with codes into `fractions`; a longer one (kind 1) reads `phrase_documents[starts:ends]`
    with its own `phrase_fractions`. Documents ascend within each.

    Documents are scored `block` at a time, so the score buffer stays in the core's cache
    however large the catalogue; within a block each document's contributions are still
    added in query order.
    """
    terms = len(starts)
    # idf * fraction, then added to the running sum: FTS5's operations, in its order.
    weights = np.empty((terms, len(fractions)), dtype=np.float64)
    for term in range(terms):
        if phrase_kinds[term] == 0:
            for code in range(len(fractions)):
                weights[term, code] = fractions[code] * idfs[term]
    buffer = np.zeros(min(block, rows), dtype=np.float64)
    high_at = starts.copy()
    size = min(k, rows)
    heap_scores = np.empty(size, dtype=np.float64)
    heap_docs = np.empty(size, dtype=np.int64)
    filled = 0
    for low in range(0, rows, block):
        high = min(low + block, rows)
        postings = 0
        for term in range(terms):
            first = high_at[term]
            if phrase_kinds[term] == 0:
                last = first + np.searchsorted(documents[first : ends[term]], high)
                for at in range(first, last):
                    buffer[documents[at] - low] += weights[term, codes[at]]
            else:
                last = first + np.searchsorted(phrase_documents[first : ends[term]], high)
                for at in range(first, last):
                    buffer[phrase_documents[at] - low] += phrase_fractions[at] * idfs[term]
            high_at[term] = last
            postings += last - first
        if postings == 0:
            continue
        # Read the block's scores back in document order, clearing them, a chunk at a time;
        # once the heap is full, a chunk with no score above its worst is passed over after a
        # branch-free count (a later document never beats an equal score).
        for chunk in range(0, high - low, CHUNK):
            end = min(chunk + CHUNK, high - low)
            if filled == size:
                worst, above = heap_scores[0], 0
                for offset in range(chunk, end):
                    above += buffer[offset] > worst
                if above == 0:
                    buffer[chunk:end] = 0.0
                    continue
            for offset in range(chunk, end):
                score = buffer[offset]
                buffer[offset] = 0.0
                document = low + offset
                if score != 0.0 and (
                    filled < size or _worse(heap_scores[0], heap_docs[0], score, document)
                ):
                    filled = _offer(heap_scores, heap_docs, filled, score, document)
    heap_scores, heap_docs = heap_scores[:filled], heap_docs[:filled]
    # Pop the worst to the back: the arrays end up best first.
    for last in range(filled - 1, 0, -1):
        heap_scores[0], heap_scores[last] = heap_scores[last], heap_scores[0]
        heap_docs[0], heap_docs[last] = heap_docs[last], heap_docs[0]
        _sift_down(heap_scores, heap_docs, last, 0)
    return heap_docs, heap_scores
