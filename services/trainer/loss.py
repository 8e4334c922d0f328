"""The token-level clipped surrogate (PPO-clip with asymmetric bounds), the one loss GRPO trains.

Per generated token t of sample i, with ratio r = exp(logprob - old_logprob) and the sample's
advantage A:

    unclipped = -A * r
    clipped   = -A * clip(r, 1 - clip_low, 1 + clip_high)
    loss_t    = max(unclipped, clipped)

Only tokens with loss_mask 1 (what the policy generated) carry loss: prompt, tool and
observation tokens are context, not actions. Aggregation:

* `sample_mean` (the reference's default): mean over samples of each sample's token mean; a
  sample is one exact-token segment, and one with no generated token counts as 0 (TRL's
  `loss_type="grpo"` does the same with `clamp(min=1)`).
* `token_mean`: one mean over all generated tokens of the batch.

`clip_fraction` counts a token when the clipped term is strictly the larger (its gradient is
then 0) and is aggregated exactly like the loss.

Sampler/trainer mismatch (rollouts on vLLM servers): "old" log-probs are the trainer's own
recomputation, but the tokens were drawn by the server, whose numerics differ. As TRL's
`vllm_importance_sampling_correction`, each token's loss is multiplied by a detached importance
weight w = exp(old - sampling), truncated (or masked) to [clip_min, clip_max]
(`importance_sampling_weights`); the weight corrects the gradient's expectation from the
sampler's distribution to the trainer's. `intraskill train loss-check` calls
`clipped_surrogate_loss` itself, so the contract it checks is the trainer's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from services.trainer.config import IS_MODES

AGGREGATIONS = ("sample_mean", "token_mean")


@dataclass(frozen=True)
class LossOutput:
    loss: torch.Tensor
    """Scalar, differentiable."""
    clip_fraction: torch.Tensor
    """Scalar, no gradient."""


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    aggregation: str,
    *,
    total_samples: int | None = None,
    total_tokens: int | None = None,
) -> torch.Tensor:
    """Mean of `values` over masked tokens, by sample or by token.

    A micro-batch of a larger update passes the update's `total_samples` / `total_tokens`, so
    summing the micro-batches' results gives the whole batch's mean exactly.
    """
    if aggregation == "sample_mean":
        per_sample = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return per_sample.sum() / (total_samples or max(values.shape[0], 1))
    if aggregation == "token_mean":
        return (values * mask).sum() / (total_tokens or mask.sum().clamp(min=1))
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {aggregation!r}")


def clipped_surrogate_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    aggregation: str,
    total_samples: int | None = None,
    total_tokens: int | None = None,
    importance_weights: torch.Tensor | None = None,
) -> LossOutput:
    """The clipped surrogate of a padded batch: [samples, tokens] tensors, advantages [samples].

    `importance_weights` ([samples, tokens], from `importance_sampling_weights`) scale each
    token's loss; they carry no gradient. The clip fraction does not depend on them.
    """
    mask = loss_mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    advantage = advantages.to(logprobs.dtype).unsqueeze(-1)
    unclipped = -advantage * ratio
    clipped = -advantage * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    # where the clipped term is strictly larger the ratio lies outside the range, so that
    # term's gradient is 0: the token stops pushing the policy further from the old one
    is_clipped = clipped > unclipped
    per_token = torch.where(is_clipped, clipped, unclipped) * mask
    if importance_weights is not None:
        per_token = per_token * importance_weights.detach().to(per_token.dtype)
    totals = {"total_samples": total_samples, "total_tokens": total_tokens}
    loss = aggregate(per_token, mask, aggregation, **totals)
    with torch.no_grad():
        fraction = aggregate(is_clipped.to(logprobs.dtype), mask, aggregation, **totals)
    return LossOutput(loss=loss, clip_fraction=fraction)


def importance_sampling_weights(
    old_logprobs: torch.Tensor,
    sampling_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    mode: str = "token_truncate",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> torch.Tensor:
    """Per-token weights exp(old - sampling) on [samples, tokens] tensors, as TRL's GRPO trainer.

    `token_*` weighs each token by its own ratio, `sequence_*` every token of a sample by the
    product over its generated tokens. `*_truncate` clamps the ratio into [clip_min, clip_max]
    (None: no bound); `*_mask` sets a ratio outside it to 0, dropping the token (or sample).
    Off the loss mask the weight is 1 (those tokens carry no loss anyway).
    """
    if mode not in IS_MODES:
        raise ValueError(f"importance sampling mode must be one of {IS_MODES}, not {mode!r}")
    mask = loss_mask.to(old_logprobs.dtype)
    difference = (old_logprobs - sampling_logprobs.to(old_logprobs.dtype)) * mask
    if mode.startswith("sequence"):
        difference = difference.sum(-1, keepdim=True).expand_as(difference)
    ratio = torch.exp(difference)
    if mode.endswith("truncate"):
        if clip_min is not None or clip_max is not None:
            ratio = torch.clamp(ratio, min=clip_min, max=clip_max)
    else:
        low = clip_min if clip_min is not None else -math.inf
        high = clip_max if clip_max is not None else math.inf
        ratio = ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    return torch.where(mask > 0, ratio, torch.ones_like(ratio))


def pad(rows: Sequence[Sequence[float]], *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Right-pad ragged rows with zeros into one [rows, longest] tensor."""
    width = max((len(row) for row in rows), default=0)
    out = torch.zeros(len(rows), width, dtype=dtype)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.as_tensor(list(row), dtype=dtype)
    return out


CASE_FIELDS = ("clip_low", "clip_high", "aggregation", "samples")
SAMPLE_FIELDS = ("logprobs", "old_logprobs", "loss_mask", "advantage")


def check_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """The loss-check contract: loss, clip_fraction and dLoss/dlogprobs per sample (float64)."""
    if missing := [key for key in CASE_FIELDS if key not in case]:
        raise ValueError(f"the case lacks {', '.join(missing)} (it needs {', '.join(CASE_FIELDS)})")
    if case["aggregation"] not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {case['aggregation']!r}")
    samples = case["samples"]
    for index, sample in enumerate(samples):
        if missing := [key for key in SAMPLE_FIELDS if key not in sample]:
            raise ValueError(f"sample {index} lacks {', '.join(missing)}")
        lengths = {len(sample[key]) for key in ("logprobs", "old_logprobs", "loss_mask")}
        if len(lengths) != 1:
            raise ValueError(
                f"sample {index}: logprobs, old_logprobs and loss_mask differ in length"
            )
        if any(value not in (0, 1) for value in sample["loss_mask"]):
            raise ValueError(f"sample {index}: loss_mask must be 0/1")
    logprobs = pad([s["logprobs"] for s in samples]).requires_grad_(True)
    output = clipped_surrogate_loss(
        logprobs,
        pad([s["old_logprobs"] for s in samples]),
        torch.tensor([float(s["advantage"]) for s in samples], dtype=torch.float64),
        pad([s["loss_mask"] for s in samples]),
        clip_low=float(case["clip_low"]),
        clip_high=float(case["clip_high"]),
        aggregation=case["aggregation"],
    )
    output.loss.backward()
    assert logprobs.grad is not None
    grads = [
        logprobs.grad[index, : len(sample["logprobs"])].tolist()
        for index, sample in enumerate(samples)
    ]
    return {
        "loss": float(output.loss.detach()),
        "clip_fraction": float(output.clip_fraction),
        "grad_logprobs": grads,
    }


def check_cases(document: Any) -> list[dict[str, Any]]:
    """loss-check's input: one case, or `{"cases": [...]}`; one result per case, in order (a
    case's `name`, when it has one, leads its result; a malformed case is named in the error)."""
    if not (isinstance(document, Mapping) and "cases" in document):
        return [check_case(document)]
    cases = document["cases"]
    if not isinstance(cases, list):
        raise ValueError('"cases" must be a list of cases')
    results = []
    for index, case in enumerate(cases):
        label = f"case {index}" + (f" ({case['name']})" if "name" in case else "")
        try:
            result = check_case(case)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{label}: {error}") from None
        results.append({"name": case["name"], **result} if "name" in case else result)
    return results
