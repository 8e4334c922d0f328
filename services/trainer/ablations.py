"""The trainer's ablation switches, named overrides used by `intraskill experiment`'s arms.

- `mask = false` (the no-mask arm): every group sees the whole bank: q = 0 and every rho = 1
  replace the bank's curriculum, so the policy never trains under omission;
- `skill_loop = false` (the grpo and fixed-s0 arms): the initial bank stays all run; no evidence
  reaches the analyst, nothing is compiled, no gate runs (the orchestrator's short cuts);
- `gate.admit = "all"` (the no-gate arm): every compiled candidate joins the bank untested.

None of them is the method; each removes one of its parts so its contribution can be measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from services.trainer.config import TrainerConfig
from services.trainer.treatments import CurriculumState


def unmasked(state: CurriculumState) -> CurriculumState:
    """The no-mask curriculum: never skill-free, every chunk always included."""
    chunks = tuple(dataclasses.replace(chunk, rho=1.0) for chunk in state.chunks)
    return dataclasses.replace(state, q=0.0, chunks=chunks)


def admitted_entries(bank, candidates: Sequence, config: TrainerConfig) -> list[dict]:
    """The no-gate bank: the current entries and every candidate, a rewrite in its target's
    place. Untested chunks carry no coefficient and the middle of the rho range (there is no
    estimate to scale by); current chunks keep theirs."""
    middle = (config.rho_min + config.rho_max) / 2
    rewrites = {c.target_chunk_id: c for c in candidates if c.target_chunk_id is not None}
    entries = []
    for entry in sorted(bank.entries, key=lambda e: e.position):
        rewrite = rewrites.pop(entry.chunk_id, None)
        if rewrite is None:
            entries.append(
                {
                    "chunk_version_id": entry.chunk_version_id,
                    "rho": entry.rho,
                    "coefficient": entry.coefficient,
                }
            )
        else:
            entries.append({"chunk_version_id": rewrite.chunk_version_id, "rho": middle})
    # additions, and rewrites of chunks no longer in the bank, join at the end
    added = [c for c in candidates if c.target_chunk_id is None or c in rewrites.values()]
    entries += [{"chunk_version_id": c.chunk_version_id, "rho": middle} for c in added]
    return entries
