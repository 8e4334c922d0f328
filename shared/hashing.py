"""Hash-seeded randomness: every random draw in a treatment or a mask is a pure function of
its coordinates, so any draw can be recomputed and audited without replaying a generator."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def hash_key(*parts: object) -> bytes:
    """sha256 of the parts joined with ':' (the reference's key layout)."""
    return hashlib.sha256(":".join(str(part) for part in parts).encode("utf-8")).digest()


def hash_uniform(*parts: object) -> float:
    """A uniform draw in [0, 1): the first 8 bytes of the key's sha256, big-endian, / 2**64."""
    return int.from_bytes(hash_key(*parts)[:8], "big") / 2**64


def content_hash(payload: Any) -> str:
    """Stable sha256 hex of a JSON-serialisable payload (sorted keys, UTF-8, no spaces)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
