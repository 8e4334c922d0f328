"""The update's distribution: `accelerate` decides, the trainer's code path is the same everywhere.

`Policy` prepares its model and optimizer with an `accelerate.Accelerator` and calls its
`backward` and `clip_grad_norm_`. Launched plainly (one process), accelerate changes nothing.
Under `accelerate launch --config_file configs/accelerate_fsdp.yaml train ...` on a GPU pool the
same calls shard parameters, gradients and optimizer state with FSDP2, one rank per GPU; there is
no home-made distribution. Accelerate runs FSDP on CUDA devices only; on a CPU (one process) the
launch goes through the same code without sharding, which is how the tests exercise it.

Checkpoints hold FULL (unsharded) tensors whatever the launch: weights as HF safetensors, the
optimizer state as one `torch.save` file. Unsharded it is `optimizer.state_dict()` (parameters
keyed by index); under FSDP every rank holds only its shard, so the state is gathered to rank 0
(keyed by parameter name) and, on resume, read by rank 0 and scattered back into each rank's
shard. Both forms resume either way: `torch.optim.Optimizer.load_state_dict` matches parameters
by position, and index keys are renamed before a sharded load.
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


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside accelerate's `AcceleratedOptimizer` (or the optimizer itself)."""
    return getattr(optimizer, "optimizer", optimizer)


def save_optimizer(accelerator: Any, model: Any, optimizer: Any, path: Path) -> None:
    """The full optimizer state in one file, written by the main process; a collective that
    every rank joins under FSDP."""
    import torch

    if is_sharded(accelerator):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        # cpu_offload: only rank 0 receives the gathered tensors (the others get {}), on the CPU
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_optimizer_state_dict(model, _torch_optimizer(optimizer), options=options)
    else:
        state = optimizer.state_dict()
    if accelerator.is_main_process:
        torch.save(state, path)
    accelerator.wait_for_everyone()  # nobody reads or moves the folder before it is written


def load_optimizer(accelerator: Any, model: Any, optimizer: Any, path: Path) -> None:
    """The state `save_optimizer` wrote (by either launch), into this launch's optimizer."""
    import torch

    if not is_sharded(accelerator):
        optimizer.load_state_dict(torch.load(path, weights_only=True))
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    inner = _torch_optimizer(optimizer)
    state: dict = {}
    if accelerator.is_main_process:  # rank 0 reads; torch broadcasts and each rank keeps its shard
        whole = torch.load(path, map_location="cpu", weights_only=True)
        state = _keyed_by_name(whole, model, inner)
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_optimizer_state_dict(model, inner, state, options=options)


def _keyed_by_name(state: dict, model: Any, optimizer: Any) -> dict:
    """An index-keyed state (an unsharded checkpoint) keyed by parameter name, as the sharded
    load matches them; indices count the optimizer's parameters in order."""
    if not all(isinstance(key, int) for key in state["state"]):
        return state
    name_of = {id(parameter): name for name, parameter in model.named_parameters()}
    names = [name_of[id(p)] for group in optimizer.param_groups for p in group["params"]]
    groups = [
        {**group, "params": [names[index] for index in group["params"]]}
        for group in state["param_groups"]
    ]
    return {
        "state": {names[index]: value for index, value in state["state"].items()},
        "param_groups": groups,
    }


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
