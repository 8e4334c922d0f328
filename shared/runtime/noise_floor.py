"""The A/A control of a test evaluation, and how comparison rows say what their sides are.

An A/A condition is a condition evaluated a second time under other sampling seeds: the eval
job derives episode seeds from (task, sample), so the copy with `sample = 1` draws its own
rollouts. Its difference from the original is pure sampling noise of the task set, the floor
every other difference is read against. `intraskill evaluate run`, the demo and
`intraskill experiment` all add it the same way, through `aa_condition`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AA_SAMPLE = 1  # the copy's sampling index; the original runs under index 0
AA_SUFFIX = "/aa"

# What a comparison row says about its two sides (the eval report's `kind`); a contrast says
# nothing. "identical": rolled out once (difference 0), by construction (one condition, or one
# run by design) or, in an experiment, by outcome (different runs whose weights matched); the
# row's `identical` field says which, and the evaluator's own rows are by construction.
KIND_NOTES = {"A/A": " (A/A: one condition, other sampling seeds)"}


def aa_condition(condition: Mapping[str, Any]) -> dict[str, Any]:
    """An eval job condition (`ConditionIn` fields) again under other sampling seeds, named
    `<name>/aa`; the eval job's default comparisons then add its A/A row."""
    return {**condition, "name": f"{condition['name']}{AA_SUFFIX}", "sample": AA_SAMPLE}


def comparison_label(comparison: Mapping[str, Any]) -> str:
    """`a - b`, saying when the two sides are one condition (A/A) or identical, and why."""
    kind = comparison.get("kind")
    if kind == "identical":
        return (
            f"{comparison['a']} - {comparison['b']} (identical "
            + (comparison.get("identical") or "by construction")
            + ")"
        )
    return f"{comparison['a']} - {comparison['b']}" + KIND_NOTES.get(kind, "")
