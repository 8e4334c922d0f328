"""Hash-seeded randomness: every random draw in a treatment or a mask is a pure function of
its coordinates, so any draw can be recomputed and audited without replaying a generator."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
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


def weights_digest(folder: str | Path) -> str | None:
    """sha256 over a checkpoint folder's weight files (`*.safetensors`, by name, then bytes):
    two folders with one digest hold the same weights. None when the folder holds none."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
