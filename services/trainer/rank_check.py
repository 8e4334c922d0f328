"""After each step, do the ranks still hold the same weights? (`rank_weight_spread`)

Under DDP every rank holds every parameter: the spread is the largest difference across ranks of
a parameter's float64 sum. Under FSDP each rank holds one shard of each sharded parameter, once,
so only what every rank holds whole can disagree: unsharded parameters and buffers (rotary
tables, a module FSDP leaves out). The check compares those; a run where nothing is replicated
reports 0.0, the same as agreement.
"""

from __future__ import annotations

from typing import Any

from services.trainer.distributed import gather_lists, is_sharded, world


def rank_weight_spread(accelerator: Any, model: Any) -> float:
    """The largest spread across ranks of a replicated tensor's float64 sum (0.0: identical, or
    one process)."""
    if world()[1] == 1:
        return 0.0
    sums = [float(tensor.detach().double().sum()) for tensor in _replicated(accelerator, model)]
    every = gather_lists([sums])
    return max((max(values) - min(values) for values in zip(*every, strict=True)), default=0.0)


def _replicated(accelerator: Any, model: Any) -> list[Any]:
    """The tensors every rank holds whole, in a fixed order."""
    unwrapped = accelerator.unwrap_model(model)
    if not is_sharded(accelerator):
        return [parameter for parameter in unwrapped.parameters()]
    from torch.distributed.tensor import DTensor

    tensors = [*unwrapped.parameters(), *unwrapped.buffers()]
    return [tensor for tensor in tensors if not isinstance(tensor, DTensor)]
