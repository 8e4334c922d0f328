"""Per-step metrics: one JSON line per rollout step, rewound on resume; TensorBoard beside it.

Outcome and curriculum figures are computed over every generated group (as the reference's
`rollout/shopsim/*`), not only the admitted ones; the counters say how many episodes were
generated and admitted and how many optimizer updates ran, so totals are sums of the lines.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.trainer.rollout_step import StepOutcome
from services.trainer.treatments import CurriculumState
from services.trainer.update import UpdateStats
from shared.kit.files import write_atomic

logger = logging.getLogger(__name__)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def step_metrics(
    outcome: StepOutcome,
    stats: UpdateStats,
    state: CurriculumState,
    *,
    round_index: int,
    step: int,
    step_in_round: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    groups = outcome.generated
    episodes = [t for group in groups for t in group.trajectories]
    scored = [t for t in episodes if t.scored]
    admitted = [t for group in outcome.admitted for t in group.trajectories]
    n_groups = len(groups)
    inclusion_rate = {
        chunk.slug: _mean([group.treatment.inclusion[j] for group in groups])
        for j, chunk in enumerate(state.chunks)
    }
    assisted = [g for g in groups if g.treatment.mode == "assisted"]
    wave = outcome.wave
    return {
        "round": round_index,
        "step": step,
        "step_in_round": step_in_round,
        "episodes_generated": outcome.episodes_generated,
        "episodes_admitted": outcome.episodes_admitted,
        "optimizer_updates": stats.updates,
        "groups_generated": n_groups,
        "groups_admitted": len(outcome.admitted),
        "waves": outcome.waves,
        "reward": _mean([t.reward for t in scored]),
        "strict": _mean([t.components["r_strict"] for t in scored]),
        "success": _mean([t.components["r_success"] for t in scored]),
        "admitted_reward": _mean([t.reward for t in admitted if t.scored]),
        "scored_rate": len(scored) / len(episodes) if episodes else None,
        "q": state.q,
        "rho_min": min(state.rhos, default=None),
        "rho_mean": _mean(state.rhos),
        "rho_max": max(state.rhos, default=None),
        "skill_free_group_rate": _mean([g.treatment.mode == "skill_free" for g in groups]),
        "assisted_empty_group_rate": _mean([g.treatment.mode == "assisted_empty" for g in groups]),
        "skills_per_assisted_group_mean": _mean([sum(g.treatment.inclusion) for g in assisted]),
        "chunks": {
            chunk.slug: {
                "target_rho": chunk.rho,
                "target_inclusion": (1 - state.q) * chunk.rho,
                "inclusion_rate": inclusion_rate[chunk.slug],
            }
            for chunk in state.chunks
        },
        "all_wrong_groups": sum(g.all_wrong for g in groups),
        "all_wrong_rate": _mean([g.all_wrong for g in groups]),
        "technical_drops": wave.dropped_technical,
        "technical_drop_rate": wave.dropped_technical / n_groups if n_groups else None,
        "zero_variance_drops": wave.dropped_zero_variance,
        "zero_variance_drop_rate": wave.dropped_zero_variance / n_groups if n_groups else None,
        "zero_variance_filler": wave.filler,
        "ignored_groups": wave.ignored,
        "loss": stats.loss,
        "clip_fraction": stats.clip_fraction,
        "entropy": stats.entropy,
        "grad_norm": stats.grad_norm,
        "logprob_mismatch": stats.logprob_mismatch,
        "logprob_mismatch_max": stats.logprob_mismatch_max,
        "importance_weight": stats.importance_weight,
        "peak_gpu_memory_gb": stats.peak_gpu_memory_gb,
        "kl_to_old": stats.kl_to_old,
        "samples": stats.samples,
        "tokens": stats.tokens,
        "generated_tokens": stats.generated_tokens,
        "ranks": stats.ranks,
        "rank_weight_spread": stats.rank_weight_spread,
        "seconds": {
            **{key: round(value, 4) for key, value in timings.items()},
            "old_logprobs_s": round(stats.old_logprobs_s, 4),
            "update_s": round(stats.update_s, 4),
        },
        "curriculum_state_id": state.state_id,
        "bank_id": state.bank_id,
    }


class MetricsLog:
    """`metrics.jsonl`, appended and fsynced per line; `rewind(n)` keeps the first n lines."""

    def __init__(self, path: Path, *, tensorboard: bool = True) -> None:
        self.path = path
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(path.parent / "tensorboard"))
            except ImportError:  # the train extra installs it: missing is worth a warning
                logger.warning(
                    "tensorboard is not installed (pip install 'intraskill[train]'): no "
                    "TensorBoard curves; %s is still written",
                    path.name,
                )

    def lines(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def rewind(self, keep: int) -> None:
        """Drop every line after the first `keep` (steps redone after a resume)."""
        kept = self.lines()[:keep]
        write_atomic(self.path, "".join(json.dumps(line) + "\n" for line in kept))

    def append(self, line: dict[str, Any]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if self.writer is not None:
            for key, value in line.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    self.writer.add_scalar(f"train/{key}", value, line["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
