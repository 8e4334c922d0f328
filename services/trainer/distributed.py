"""The update's distribution: `accelerate` decides, the trainer's code path is the same everywhere.

`Policy` prepares its model and optimizer with an `accelerate.Accelerator` and calls its
`backward` and `clip_grad_norm_`. Launched plainly (one process), accelerate changes nothing.
Under `accelerate launch --config_file configs/accelerate_fsdp.yaml train ...` on a GPU pool the
same calls shard parameters, gradients and optimizer state with FSDP2, one rank per GPU; there is
no home-made distribution. Accelerate runs FSDP on CUDA devices only; on a CPU (one process) the
launch goes through the same code without sharding, which is how the tests exercise it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def make_accelerator(device: Any) -> Any:
    """The process's Accelerator: CPU-only when the policy lives on the CPU."""
    from accelerate import Accelerator

    return Accelerator(cpu=str(device).startswith("cpu"))


def is_sharded(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def save_weights(accelerator: Any, model: Any, folder: Path) -> None:
    """HF weights (safetensors) of a prepared model; under FSDP the shards are gathered first
    (a collective every rank joins) and the main process writes."""
    unwrapped = accelerator.unwrap_model(model)
    if not is_sharded(accelerator):
        unwrapped.save_pretrained(folder, safe_serialization=True)
        return
    state = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        unwrapped.save_pretrained(folder, safe_serialization=True, state_dict=state)
    accelerator.wait_for_everyone()
