"""Run by `test_precision.py` in a fresh process (accelerate fixes one mixed precision per
process): one rollout step (2 AdamW updates) of the tiny model at the paper's optimizer settings,
with the config dtype given on the command line; writes every parameter's change to a file.

    python -m tests.trainer.precision_probe bfloat16 OUT.pt
"""

from __future__ import annotations

import sys

import torch

from services.trainer.config import TrainerConfig
from services.trainer.policy import Policy
from shared.runtime.agent.models import resolve_model
from tests.trainer.test_distributed import _episodes


def paper_optimizer(dtype: str) -> TrainerConfig:
    """The paper preset's update (lr 1e-6, AdamW betas (0.9, 0.98), weight decay 0.1, clip 1.0,
    two updates per step) on the tiny model in `dtype`, on the CPU."""
    paper = TrainerConfig.from_toml("configs/paper.toml")
    return TrainerConfig(
        model="tiny",
        device="cpu",
        dtype=dtype,
        lr=paper.lr,
        betas=paper.betas,
        weight_decay=paper.weight_decay,
        grad_clip=paper.grad_clip,
        group_size=2,
        groups_per_wave=2,
        groups_admitted=2,
        global_batch=2,
    )


def main(dtype: str, out: str) -> None:
    torch.manual_seed(0)
    policy = Policy.load(resolve_model("tiny"), paper_optimizer(dtype), temperature=0.6)
    model = policy.sampling_model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    policy.train_step(_episodes(model.get_input_embeddings().weight.shape[0]))
    changes = {name: (p.detach() - before[name]).float() for name, p in model.named_parameters()}
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    state = policy.optimizer.state_dict()["state"]
    moments = sorted({str(v.dtype) for s in state.values() for k, v in s.items() if k != "step"})
    torch.save({"changes": changes, "param_dtypes": dtypes, "moment_dtypes": moments}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
