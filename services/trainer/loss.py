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
then 0) and is aggregated exactly like the loss. `intraskill train loss-check` calls
`clipped_surrogate_loss` itself, so the contract it checks is the trainer's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

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
) -> LossOutput:
    """The clipped surrogate of a padded batch: [samples, tokens] tensors, advantages [samples]."""
    mask = loss_mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    advantage = advantages.to(logprobs.dtype).unsqueeze(-1)
    unclipped = -advantage * ratio
    clipped = -advantage * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    # where the clipped term is strictly larger the ratio lies outside the range, so that
    # term's gradient is 0: the token stops pushing the policy further from the old one
    is_clipped = clipped > unclipped
    per_token = torch.where(is_clipped, clipped, unclipped) * mask
    totals = {"total_samples": total_samples, "total_tokens": total_tokens}
    loss = aggregate(per_token, mask, aggregation, **totals)
    with torch.no_grad():
        fraction = aggregate(is_clipped.to(logprobs.dtype), mask, aggregation, **totals)
    return LossOutput(loss=loss, clip_fraction=fraction)


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
