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

import itertools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from torch.distributed import DistStoreError

from services.trainer.environment import TrainerEnvironment

MASTER_DTYPE = "float32"
FOLLOWER_POLL_S = 60.0  # how often a waiting follower re-arms its wait on the store
_ANNOUNCEMENTS = itertools.count(1)


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
    """The process's `PartialState` (the process group under a launcher). `wait_s` bounds one
    collective (`collective_timeout_s`): a rank that never joins fails the others after it."""
    from accelerate import PartialState

    return PartialState(cpu=device == "cpu", timeout=timedelta(seconds=wait_s))


def world() -> tuple[int, int]:
    """(this process's global rank, number of processes)."""
    from accelerate import PartialState

    state = PartialState()
    return state.process_index, state.num_processes


def announce(command: str, *args: Any) -> None:
    """The leader tells the followers which collective it starts next (no-op elsewhere): a key
    in the launcher's store wakes them, then the call and its arguments are broadcast."""
    from accelerate.utils import broadcast_object_list

    rank, size = world()
    if size > 1 and rank == 0:
        _store().set(_next_key(), command)
        broadcast_object_list([(command, args)], from_process=0)


def next_command() -> tuple[str, tuple]:
    """A follower's wait for the leader's next `announce`, however long the leader works alone
    (rollouts, a gate: hours). The wait polls the launcher's store, not a collective, so the
    process group's timeout bounds only real collectives; a leader that dies takes the launcher
    and this process with it."""
    from accelerate.utils import broadcast_object_list

    key, store = _next_key(), _store()
    while True:
        try:
            store.wait([key], timedelta(seconds=FOLLOWER_POLL_S))
            break
        except DistStoreError:  # the store's wait timed out: the leader is still busy
            continue
    box: list[Any] = [None]
    broadcast_object_list(box, from_process=0)
    return box[0]


class LeaderFailed(RuntimeError):
    """On a follower: the leader's part of the current collective failed (its message says what);
    the follower drops the call and waits for the leader's next one (`stop`)."""


def main_process_writes(write: Callable[[], None], what: str) -> None:
    """`write()` on the main process alone, then every rank learns how it went (one broadcast):
    a failed write raises on the leader as it was and `LeaderFailed` on the followers, instead
    of leaving them in a barrier until the collective timeout."""
    import torch.distributed as dist

    ranked = dist.is_available() and dist.is_initialized()
    rank, size = (dist.get_rank(), dist.get_world_size()) if ranked else (0, 1)
    failure: BaseException | None = None
    if rank == 0:
        try:
            write()
        except Exception as error:  # reported to every rank below, then raised here
            failure = error
    if size > 1:
        box = [None if failure is None else f"{type(failure).__name__}: {failure}"]
        dist.broadcast_object_list(box, src=0)
        if rank != 0 and box[0] is not None:
            raise LeaderFailed(f"rank 0 failed to write {what}: {box[0]}")
    if failure is not None:
        raise failure


def fsdp_launch() -> bool:
    """Whether the launcher asked for FSDP (`accelerate launch` with an FSDP config sets this;
    read before any model is prepared)."""
    return TrainerEnvironment().accelerate_use_fsdp


def launch_problem(
    *, ranks: int, sharded: bool, in_process_rollouts: bool, warm_start: bool
) -> str | None:
    """Why a launch would hang (None: it would not). Checked on every rank before any work."""
    if ranks > 1 and sharded and in_process_rollouts:
        return (
            f"FSDP over {ranks} ranks with in-process rollouts would hang: rank 0 alone would "
            "generate with the sharded model, whose all-gathers wait for ranks that never join. "
            "List vLLM servers in [rollout_servers] (docs/trainer.md, 'GPU run'), or launch one "
            "process"
        )
    if ranks > 1 and warm_start:
        return (
            f"the warm start cannot run under {ranks} ranks: TRL's SFTTrainer would run on rank 0 "
            "alone and wait for ranks that never join. Run it in one process first "
            "(`intraskill train warm-start`, or this run with one process), then launch the "
            "ranks with model = its folder and warm_start.enabled = false"
        )
    return None


def _store() -> Any:
    """The launcher's key-value store the process group was built on."""
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store()


def _next_key() -> str:
    """The key of the next announcement; leader and followers count announcements alike."""
    return f"intraskill/announce/{next(_ANNOUNCEMENTS)}"


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
