"""Where the public reference gates live (../shared/data/reference-gates), or skip cleanly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REFERENCE_GATES = Path(
    os.environ.get(
        "INTRASKILL_REFERENCE_GATES",
        Path(__file__).resolve().parents[3] / "shared" / "data" / "reference-gates",
    )
)
ROUNDS = (0, 1, 2, 3)
PUBLISHED_ROUNDS = (0, 1)  # rounds with expected.json


def round_dir(number: int) -> Path:
    folder = REFERENCE_GATES / f"round-{number:03d}"
    if not (folder / "slots.json").is_file():
        pytest.skip(f"reference gates not found at {REFERENCE_GATES}")
    return folder


def expected(number: int) -> dict:
    return json.loads((round_dir(number) / "expected.json").read_text(encoding="utf-8"))
