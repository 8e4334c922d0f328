"""The public reference gates, vendored under tests/fixtures/reference (see its README)."""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE_GATES = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "reference-gates"
ROUNDS = (0, 1, 2, 3)
PUBLISHED_ROUNDS = (0, 1)  # rounds with expected.json


def round_dir(number: int) -> Path:
    return REFERENCE_GATES / f"round-{number:03d}"


def expected(number: int) -> dict:
    return json.loads((round_dir(number) / "expected.json").read_text(encoding="utf-8"))
