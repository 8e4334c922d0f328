"""Per-token truncated importance weights exp(trainer old - sampler) of server-sampled samples.

Rollout servers sample with their own kernels (bf16 on a GPU), so their log-probs differ a little
from the trainer's recomputed "old" ones; `loss.importance_sampling_weights` (TRL's modes and
caps) turns the difference into weights that correct the loss for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from services.trainer.loss import importance_sampling_weights
from shared.runtime.agent.advantage import TrainingSample


def importance_weights(
    samples: Sequence[TrainingSample], old: Sequence[Sequence[float]], servers: Any
) -> list[list[float]]:
    """Per token, the truncated weight of each sample under `[rollout_servers]`' mode and caps."""
    out = []
    for sample, row in zip(samples, old, strict=True):
        segment = sample.segment
        weights = importance_sampling_weights(
            torch.tensor([row], dtype=torch.float64),
            torch.tensor([segment.logprobs], dtype=torch.float64),
            torch.tensor([segment.loss_mask]),
            mode=servers.importance_sampling_mode,
            clip_min=servers.importance_sampling_clip_min or None,
            clip_max=servers.importance_sampling_clip_max,
        )
        out.append(weights[0].tolist())
    return out
