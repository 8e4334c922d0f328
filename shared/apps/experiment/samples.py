"""Several sampled episodes per test task, pooled per task before any contrast.

The test split has a fixed number of tasks (100 at the CPU preset); when the design needs more
paired episodes than that to see the effect of interest, every condition is rolled out again
under other sampling seeds and its per-task success becomes the mean over its samples. Tasks
stay the unit of pairing and resampling, so intervals and the MDE keep reading per-task
differences (now of means), and the A/A copies get samples of their own.

Sampling indices: an original condition's sample j runs under index 2j and its A/A copy's
under 2j + 1, so sample 0 keeps the indices a one-sample test always had (0, and 1 for the
copy, `noise_floor.AA_SAMPLE`) and no two samples share seeds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shared.runtime.noise_floor import AA_SAMPLE

SAMPLE_SUFFIX = "/sample"
_EXTRA = re.compile(rf"^(?P<name>.+){re.escape(SAMPLE_SUFFIX)}(?P<j>[1-9][0-9]*)$")


def with_samples(conditions: Sequence[Mapping[str, Any]], samples: int) -> list[dict[str, Any]]:
    """The conditions, each followed by its extra samples 1 .. samples-1 (`<name>/sample<j>`)."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    out = []
    for condition in conditions:
        first = int(condition.get("sample") or 0)
        if first not in (0, AA_SAMPLE):
            raise ValueError(f"condition {condition['name']}: sample {first} is not 0 or A/A")
        out.append(dict(condition))
        out += [
            {**condition, "name": f"{condition['name']}{SAMPLE_SUFFIX}{j}", "sample": first + 2 * j}
            for j in range(1, samples)
        ]
    return out


def pool_samples(report: Mapping[str, Any]) -> dict[str, Any]:
    """`report` with each condition's column the per-task mean over its samples (the extra
    sample columns folded in and removed) and `samples` set. Every condition must have the
    same number of samples: a contrast of a 2-sample mean with a single draw would mix noise
    levels under one name."""
    columns = report["per_task"]["columns"]
    groups: dict[str, list[str]] = {name: [name] for name in columns if not _EXTRA.match(name)}
    for name in columns:
        if match := _EXTRA.match(name):
            if match["name"] not in groups:
                raise ValueError(f"sample column {name} has no first sample {match['name']}")
            groups[match["name"]].append(name)
    counts = {len(names) for names in groups.values()}
    if len(counts) > 1:
        raise ValueError(f"conditions have different sample counts: {sorted(counts)}")
    pooled = {
        name: {field: np.mean([columns[n][field] for n in names], axis=0).tolist()
               for field in columns[name]}
        for name, names in groups.items()
    }  # fmt: skip
    return {
        **report,
        "samples": counts.pop() if counts else 1,
        "per_task": {**report["per_task"], "columns": pooled},
        "conditions": {
            name: value
            for name, value in report.get("conditions", {}).items()
            if not _EXTRA.match(name)
        },
    }
