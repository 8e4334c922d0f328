"""One optimizer update of the GRPO loss, micro-batched, and what a rollout step's updates measured.

Each rank computes its share of the update's micro-batches (`rank_share`); DDP / FSDP average
gradients over ranks, and each rank's losses are parts of the one loss of the global batch, so
the losses are scaled by the rank count to make that average their sum. A rank with fewer
micro-batches runs a padding turn (a forward and a zero-loss backward): every rank makes the
same collectives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from services.trainer.distributed import rank_share, world
from services.trainer.logprobs import micro_batches, padded
from services.trainer.loss import aggregate, clipped_surrogate_loss
from shared.runtime.agent.advantage import TrainingSample

if TYPE_CHECKING:
    from services.trainer.policy import Policy


@dataclass(frozen=True)
class UpdateStats:
    """What one rollout step's updates measured (means over updates)."""

    loss: float
    clip_fraction: float
    grad_norm: float
    entropy: float
    logprob_mismatch: float
    """mean |trainer old log-prob - sampling log-prob| over generated tokens"""
    logprob_mismatch_max: float
    """the largest |trainer old log-prob - sampling log-prob| over generated tokens"""
    importance_weight: dict[str, float] | None
    """min, mean and max of the importance weights over generated tokens (None: no correction)"""
    kl_to_old: float
    """mean (old - new) log-prob on generated tokens after the step's updates (slime's ppo_kl)"""
    updates: int
    samples: int
    generated_tokens: int
    tokens: int
    old_logprobs_s: float
    update_s: float
    ranks: int = 1
    rank_weight_spread: float | None = 0.0
    """after the step, the largest spread across ranks of a replicated tensor's float64 sum:
    0.0 when every rank holds the same weights (`rank_check.py`)"""
    peak_gpu_memory_gb: float | None = None
    """the step's peak allocated accelerator memory (None on the CPU)"""


def optimizer_update(
    policy: Policy,
    samples: Sequence[TrainingSample],
    old: Sequence[Sequence[float]],
    reference: Sequence[Sequence[float]] | None,
    weights: Sequence[Sequence[float]] | None,
    indices: Sequence[int],
) -> tuple[float, float, float]:
    """One optimizer update, micro-batched; returns (loss, clip fraction, grad norm).

    `old`, `reference` and `weights` are indexed like the step's samples; `indices` maps this
    update's samples to them."""
    config, accelerator, device = policy.config, policy.accelerator, policy.device
    policy.model.train()
    policy.optimizer.zero_grad(set_to_none=True)
    totals = {
        "total_samples": len(samples),
        "total_tokens": max(sum(s.segment.generated_tokens for s in samples), 1),
    }
    loss_sum, clip_sum = 0.0, 0.0
    rows = [sample.segment.token_ids for sample in samples]
    batches = micro_batches([len(r) for r in rows], config.micro_batch_tokens)
    ranks = world()[1]
    for share in rank_share(batches):
        batch = share or batches[0]  # a padding turn: a zero loss, the same collectives
        masks = [samples[i].segment.loss_mask for i in batch]
        logprobs, entropy = policy.forward([rows[i] for i in batch], masks)
        width = logprobs.shape[1]
        mask = padded(masks, width, device)
        old_t = padded([old[indices[i]] for i in batch], width, device)
        weights_t = (
            padded([weights[indices[i]] for i in batch], width, device)
            if weights is not None
            else None
        )
        advantages = torch.tensor(
            [samples[i].advantage for i in batch], dtype=torch.float32, device=device
        )
        out = clipped_surrogate_loss(
            logprobs,
            old_t,
            advantages,
            mask,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            aggregation=config.aggregation,
            importance_weights=weights_t,
            **totals,
        )
        loss = out.loss
        if policy.reference is not None and reference is not None:
            ref = padded([reference[indices[i]] for i in batch], width, device)
            # k3 estimator of KL(policy || reference) per generated token
            delta = ref - logprobs
            kl = torch.exp(delta) - delta - 1
            loss = loss + config.kl_coef * aggregate(kl, mask, config.aggregation, **totals)
        if config.entropy_coef > 0:  # a bonus: higher entropy lowers the loss
            loss = loss - config.entropy_coef * aggregate(
                entropy, mask, config.aggregation, **totals
            )
        if share is None:
            accelerator.backward(loss * 0.0)
            continue
        accelerator.backward(loss * ranks)
        loss_sum += float(loss.detach())
        clip_sum += float(out.clip_fraction)
    if ranks > 1:
        sums = torch.tensor([loss_sum, clip_sum], dtype=torch.float64, device=device)
        loss_sum, clip_sum = accelerator.reduce(sums, reduction="sum").tolist()
    grad_norm = accelerator.clip_grad_norm_(
        [p for p in policy.model.parameters() if p.requires_grad], config.grad_clip
    )
    policy.optimizer.step()
    policy.model.eval()
    return loss_sum, clip_sum, float(grad_norm)


def sampler_differences(
    samples: Sequence[TrainingSample], old: Sequence[Sequence[float]]
) -> list[float]:
    """|trainer old log-prob - sampling log-prob| of every generated token."""
    return [
        abs(recomputed - sampled)
        for sample, row in zip(samples, old, strict=True)
        for mask, sampled, recomputed in zip(
            sample.segment.loss_mask, sample.segment.logprobs, row, strict=True
        )
        if mask
    ]


def masked_summary(
    samples: Sequence[TrainingSample], values: Sequence[Sequence[float]]
) -> dict[str, float]:
    """min, mean and max of per-token values over generated tokens."""
    kept = [
        value
        for sample, row in zip(samples, values, strict=True)
        for mask, value in zip(sample.segment.loss_mask, row, strict=True)
        if mask
    ]
    if not kept:
        return {"min": math.nan, "mean": math.nan, "max": math.nan}
    return {"min": min(kept), "mean": sum(kept) / len(kept), "max": max(kept)}


def mean_masked_difference(
    samples: Sequence[TrainingSample],
    old: Sequence[Sequence[float]],
    new: Sequence[Sequence[float]],
) -> float:
    """Mean (old - new) over generated tokens."""
    total, count = 0.0, 0
    for sample, before, after in zip(samples, old, new, strict=True):
        for mask, a, b in zip(sample.segment.loss_mask, before, after, strict=True):
            if mask:
                total += a - b
                count += 1
    return total / count if count else math.nan


def peak_gpu_memory_gb(device: Any) -> float | None:
    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30
