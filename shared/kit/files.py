"""Whole-file writes that a crash cannot leave half done: the text goes to a temporary file
beside the target, is fsynced, then replaces the target in one rename (readers see the old file
or the new one, never a mix)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """`data` as JSON (serialized first: a value that cannot be written leaves the file as
    it was)."""
    write_atomic(path, json.dumps(data, indent=indent))
