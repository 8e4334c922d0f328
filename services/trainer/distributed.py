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

Ranks (`torchrun --nproc-per-node N` or `accelerate launch`): global rank 0 alone orchestrates
(folder lock, services, rollouts, metrics, state, checkpoints, gates); every other rank follows
(`follow_the_leader`): it waits for the leader's next collective (`announce`), joins it, and
waits again. The collectives are `Policy`'s load, train step, save and optimizer load. The
admitted batch travels with the train-step announcement (broadcast), and each rank then updates
on its share of the micro-batches (`rank_share`); DDP / FSDP average the gradients over ranks,
so every rank steps the same optimizer on the same gradient and the weights stay identical.

Precision: a config dtype of bfloat16 means bf16 compute with fp32 master weights and fp32
optimizer state: the model loads in float32 and accelerate's mixed precision (autocast, or
FSDP's `MixedPrecisionPolicy` under FSDP) runs the forward in bf16. No optimizer ever steps
bf16 parameters (`Policy` refuses to build one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MASTER_DTYPE = "float32"


def make_accelerator(device: Any, mixed_precision: str = "no") -> Any:
    """The process's Accelerator: CPU-only when the policy lives on the CPU."""
    from accelerate import Accelerator

    return Accelerator(cpu=str(device).startswith("cpu"), mixed_precision=mixed_precision)


def precision(dtype: str) -> tuple[str, str]:
    """(dtype the weights load in, accelerate's mixed precision) for a config dtype."""
    if dtype == "bfloat16":  # bf16 compute over fp32 master weights and optimizer state
        return MASTER_DTYPE, "bf16"
    return dtype, "no"


def start_ranks(device: str, wait_s: float) -> Any:
    """The process's `PartialState` (the process group under a launcher). `wait_s` bounds how
    long a follower waits for the leader's next collective (a gate can take hours)."""
    from datetime import timedelta

    from accelerate import PartialState

    return PartialState(cpu=device == "cpu", timeout=timedelta(seconds=wait_s))


def world() -> tuple[int, int]:
    """(this process's global rank, number of processes)."""
    from accelerate import PartialState

    state = PartialState()
    return state.process_index, state.num_processes


def announce(command: str, *args: Any) -> None:
    """The leader tells the followers which collective it starts next (no-op elsewhere)."""
    from accelerate.utils import broadcast_object_list

    rank, size = world()
    if size > 1 and rank == 0:
        broadcast_object_list([(command, args)], from_process=0)


def next_command() -> tuple[str, tuple]:
    """A follower's wait for the leader's next `announce`."""
    from accelerate.utils import broadcast_object_list

    box: list[Any] = [None]
    broadcast_object_list(box, from_process=0)
    return box[0]


def rank_share(batches: list[list[int]]) -> list[list[int] | None]:
    """This process's `share_of` the step's micro-batches."""
    return share_of(batches, *world())


def share_of(batches: list[Any], rank: int, size: int) -> list[Any]:
    """Rank `rank`'s micro-batches out of `size` ranks (every size-th, from its rank), padded
    with None so that every rank runs the same number of forwards and backwards (each is a
    collective under DDP/FSDP)."""
    mine: list[Any] = list(batches[rank::size])
    return mine + [None] * (-(-len(batches) // size) - len(mine))


def gather_lists(items: list[Any]) -> list[Any]:
    """Every rank's `items`, concatenated, on every rank (the list itself in one process)."""
    from accelerate.utils import gather_object

    return list(gather_object(items)) if world()[1] > 1 else items


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
    (a collective every rank joins) and the main process writes. A tied output embedding is
    also written under its own name: vLLM servers reload these folders in place, and a layer
    the folder names no weight for keeps its old packed copy (`shared/vllm_weights.py`)."""
    from shared.vllm_weights import TIED_HEAD_FILE, write_tied_head

    unwrapped = accelerator.unwrap_model(model)
    state = accelerator.get_state_dict(model) if is_sharded(accelerator) else None
    if accelerator.is_main_process:
        unwrapped.save_pretrained(folder, safe_serialization=True, state_dict=state)
        head = tied_head(unwrapped, state)
        # (a resumed run may save into a folder that has the head file of an earlier save)
        if head is not None and head[0] not in saved_names(folder, without=TIED_HEAD_FILE):
            write_tied_head(folder, *head)
    accelerator.wait_for_everyone()


def tied_head(model: Any, state: dict[str, Any] | None = None) -> tuple[str, Any] | None:
    """(the output embedding's weight name, the input embedding's tensor) when the two are tied;
    None for an untied model or a peft model (which saves its adapter only)."""
    if getattr(model, "peft_config", None):
        return None
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if embedding is None or head is None or head.weight is not embedding.weight:
        return None
    names = {id(module): name for name, module in model.named_modules()}
    embedding_name = f"{names[id(embedding)]}.weight"
    tensor = (state if state is not None else model.state_dict())[embedding_name]
    return f"{names[id(head)]}.weight", tensor


def saved_names(folder: Path, *, without: str = "") -> set[str]:
    """The tensor names in an HF folder's safetensors files but `without` (headers only)."""
    from safetensors import safe_open

    names: set[str] = set()
    for file in folder.glob("*.safetensors"):
        if file.name == without:
            continue
        with safe_open(str(file), "pt") as handle:
            names.update(handle.keys())
    return names
