"""Token log-probs of the policy's rows, with logits only where the loss needs them.

The vocabulary projection is the update's largest tensor (tokens x vocabulary, in fp32 for the
log-softmax), and most of an episode's tokens are prompt, persona and page text that carry no
loss. The forward hands the output head the hidden states at the positions that score a
generated token only (`scored_positions_only`), so that tensor scales with the generated tokens,
not the episode's length.

Why a hook on the head rather than transformers' boolean `logits_to_keep`: that mask exists only
in recent transformers 5.x (`slice_logits_to_keep`); transformers 4.56-5.17 index
`hidden_states[:, logits_to_keep, :]`, where a [B, T] mask raises `IndexError: too many
indices`. The hook works the same on every version, inside the model's own forward (so FSDP's
all-gathers of the head run as usual).

TRL piece used: `selective_log_softmax_and_entropy` (per-token log-probs and entropies in one
pass, without materialising the full log-softmax).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from trl.trainer.utils import selective_log_softmax_and_entropy


def micro_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Sample indices packed longest first so that rows x longest row <= budget per batch."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches: list[list[int]] = []
    for index in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= budget:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def padded(rows: Sequence[Sequence[float]], width: int, device: Any) -> torch.Tensor:
    """Right-padded float32 rows [len(rows), width] on `device`."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(device)


@contextmanager
def scored_positions_only(model: Any, keep: torch.Tensor) -> Iterator[None]:
    """While open, `model`'s output head sees the hidden states at `keep` ([B, T] bool) only:
    its logits come out [N kept, V], row-major as `hidden[keep]` flattens them."""
    head = _unwrapped(model).get_output_embeddings()

    def select(_module: Any, args: tuple) -> tuple:
        return (args[0][keep], *args[1:])

    handle = head.register_forward_pre_hook(select)
    try:
        yield
    finally:
        handle.remove()


def token_logprobs(
    model: Any,
    rows: Sequence[Sequence[int]],
    masks: Sequence[Sequence[int]],
    *,
    pad_id: int,
    device: Any,
    temperature: float,
    entropy_requires_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs [B, T] and entropies [B, T] of right-padded rows (position t scores
    token t given < t), computed at generated tokens (loss mask 1) only, 0 elsewhere."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[index, : len(row)] = 1
    ids, attention = ids.to(device), attention.to(device)
    scored = padded(masks, width, device) > 0  # [B, T]: the tokens that carry loss
    scored[:, 0] = False  # nothing scores the first token
    # The logits at position p score token p + 1: keep the positions before a scored token.
    before = torch.zeros_like(scored)
    before[:, :-1] = scored[:, 1:]
    if not bool(before.any()):
        # Nothing scored: one position still runs the head, so a loss keeps its graph and
        # every rank joins the same collectives; masked_scatter below uses none of it.
        before[0, 0] = True
    with scored_positions_only(model, before):
        # logits_to_keep=0: every position reaches the head, which keeps only `before`
        logits = model(input_ids=ids, attention_mask=attention, logits_to_keep=0).logits
    # the sampler's distribution is log_softmax(logits / T); fp32 for the log-softmax
    logprobs, entropy = selective_log_softmax_and_entropy(
        logits.float(),
        ids.roll(-1, dims=1)[before],  # the token each kept position scores
        entropy_requires_grad=entropy_requires_grad,
        temperature=temperature,
    )
    zeros = torch.zeros((len(rows), width), dtype=logprobs.dtype, device=device)
    return zeros.masked_scatter(scored, logprobs), zeros.masked_scatter(scored, entropy)


def _unwrapped(model: Any) -> Any:
    """The HF model inside a DDP wrapper (FSDP2 shards the model in place: no wrapper)."""
    return getattr(model, "module", model)
