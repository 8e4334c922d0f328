"""One gloo rank of the FSDP2 test (`test_fsdp_ranks.py` launches two with torchrun).

Accelerate turns on FSDP for GPU launches only (its state upgrades MULTI_GPU, never MULTI_CPU).
`accelerate_fsdp_on_cpu` makes the same launch reach accelerate's FSDP2 code on the CPU: the
environment an `accelerate launch --config_file configs/accelerate_fsdp.yaml` sets, and the
process state's distributed type shown as MULTI_GPU for the one moment the Accelerator reads it;
the device stays the CPU and the process group gloo. Everything after that is the product's
path: `Policy` prepares with `accelerator.prepare` (FSDP2's `fully_shard` per decoder layer),
updates, gathers with `accelerator.get_state_dict`, saves and resumes.

Both ranks run the same calls (SPMD): `announce` is switched off, since the leader/follower
protocol is not what this checks (`test_ranks.py` runs it end to end). Each rank writes what it
saw to OUT/rank-R.json; the test reads those.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

FSDP_LAUNCH_ENV = {  # what accelerate launch sets from configs/accelerate_fsdp.yaml
    "ACCELERATE_USE_FSDP": "true",
    "FSDP_VERSION": "2",
    "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
    "FSDP_RESHARD_AFTER_FORWARD": "true",
    "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",
}


def accelerate_fsdp_on_cpu() -> None:
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType

    os.environ.update(FSDP_LAUNCH_ENV)
    PartialState(cpu=True)  # gloo over the launcher's ranks
    PartialState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
    Accelerator(cpu=True)  # the shared state now carries the FSDP plugin; Policy's reuses it


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return (tensor.to_local() if hasattr(tensor, "to_local") else tensor).detach().clone()


def main(out: Path) -> None:
    from accelerate.utils import DistributedType
    from safetensors.torch import load_file
    from torch.distributed.tensor import DTensor

    import services.trainer.policy as policy_module
    from services.trainer.distributed import world
    from services.trainer.rank_check import rank_weight_spread
    from shared.runtime.agent.models import resolve_model
    from tests.trainer.test_distributed import TEMPERATURE, _config, _episodes

    accelerate_fsdp_on_cpu()
    policy_module.announce = lambda *args: None  # SPMD: every rank makes every call
    rank = world()[0]
    tiny = resolve_model("tiny")
    config = _config().with_(kl_coef=0.1, micro_batch_tokens=20)  # one row per micro-batch
    policy = policy_module.Policy.load(tiny, config, TEMPERATURE, reference_path=tiny)
    seen: dict = {
        "distributed_type": str(policy.accelerator.distributed_type),
        "policy_sharded": all(isinstance(p, DTensor) for p in policy.model.parameters()),
        "reference_sharded": all(isinstance(p, DTensor) for p in policy.reference.parameters()),
        "local_numel": sum(_local(p).numel() for p in policy.model.parameters()),
        "full_numel": sum(p.numel() for p in policy.model.parameters()),
    }
    assert policy.accelerator.distributed_type == DistributedType.FSDP
    before = policy.accelerator.get_state_dict(policy.model)  # gathered to rank 0 (else {})
    vocab = policy.sampling_model.get_input_embeddings().weight.shape[0]
    stats = policy.train_step(_episodes(vocab))
    seen.update(updates=stats.updates, spread=stats.rank_weight_spread, loss=stats.loss)
    after = policy.accelerator.get_state_dict(policy.model)
    if rank == 0:
        seen["changed"] = sum(not torch.equal(before[k], after[k]) for k in after)
        seen["tensors"] = len(after)

    folder = out / "checkpoint"
    policy.save(folder)
    if rank == 0:  # the file holds the whole trained tensors
        saved = load_file(str(folder / "model.safetensors"))
        seen["saved_equal"] = all(torch.equal(saved[k], after[k]) for k in saved)
        seen["saved_names"] = sorted(set(after) - set(saved))  # a tied head is saved once

    fresh = policy_module.Policy.load(folder, config, TEMPERATURE, reference_path=tiny)
    fresh.load_optimizer(folder)
    pairs = list(zip(policy.model.parameters(), fresh.model.parameters(), strict=True))
    seen["reloaded_weights_equal"] = all(torch.equal(_local(a), _local(b)) for a, b in pairs)
    states = [(policy.optimizer.state[a], fresh.optimizer.state[b]) for a, b in pairs]
    seen["reloaded_moments_equal"] = all(
        torch.equal(_local(s[m]), _local(t[m]))
        for s, t in states
        for m in ("exp_avg", "exp_avg_sq", "step")
    )

    # the weight check sees a replicated tensor that differs on one rank (rotary tables)
    buffers = [b for b in policy.sampling_model.buffers() if not isinstance(b, DTensor)]
    seen["replicated_buffers"] = len(buffers)
    if rank == 1 and buffers:
        buffers[0].add_(1.0)
    seen["spread_after_perturbing_rank_1"] = rank_weight_spread(policy.accelerator, policy.model)
    (out / f"rank-{rank}.json").write_text(json.dumps(seen))
    torch.distributed.barrier()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
