"""The policy the trainer owns: a causal LM, its AdamW optimizer, and the collectives on them.

One rollout step admits `groups_admitted` groups; their episodes, in group order, are cut into
global batches of `global_batch` episodes (a whole number of groups), one optimizer update each.
Before the first update every sample's log-probs are recomputed with the weights that sampled
them ("old" log-probs); both updates of the step use those, so the second update's ratio
measures how far the first one moved the policy. The backend's sampling log-probs give the
mismatch metric (sampler vs trainer numerics) and, with rollout servers, the truncated
importance weights that correct the loss for that mismatch.

Each job has its module: `model_loading` (weights, LoRA), `logprobs` (token log-probs with
logits at generated tokens only), `update` (one optimizer update, the step's figures),
`importance_weights`, `rank_check` (do the ranks hold the same weights), `saving` (weights
and optimizer files). This class holds the state and sequences them; under ranks, the methods
that `announce` are the collectives the followers join (`policy_loading.follow_the_leader`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from services.trainer.config import TrainerConfig
from services.trainer.distributed import (
    announce,
    gather_lists,
    is_sharded,
    make_accelerator,
    precision,
    rank_share,
    world,
)
from services.trainer.importance_weights import importance_weights
from services.trainer.logprobs import micro_batches, token_logprobs
from services.trainer.model_loading import causal_lm, with_lora
from services.trainer.rank_check import rank_weight_spread
from services.trainer.saving import load_optimizer, save_optimizer, save_weights
from services.trainer.update import (
    UpdateStats,
    masked_summary,
    mean_masked_difference,
    optimizer_update,
    peak_gpu_memory_gb,
    sampler_differences,
)
from shared.runtime.agent.advantage import TrainingSample

OPTIMIZER_FILE = "optimizer.pt"

__all__ = ["OPTIMIZER_FILE", "Policy", "UpdateStats", "micro_batches"]


class Policy:
    """A causal LM with its AdamW optimizer; `sampling_model` is what a rollout backend samples
    from. Under ranks, the methods the leader announces are collectives the followers join."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: TrainerConfig,
        temperature: float,
        reference: Any = None,
    ):
        self.tokenizer, self.config = tokenizer, config
        self.temperature = temperature if temperature > 0 else 1.0
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        trainable = [p for p in model.parameters() if p.requires_grad]
        low = sorted({str(p.dtype) for p in trainable if p.dtype != torch.float32})
        if low:  # AdamW on bf16 weights rounds most lr-1e-6 updates away: fp32 masters only
            raise ValueError(
                f"trainable parameters in {', '.join(low)}: load float32 master weights and "
                "let mixed precision compute in bf16 (config dtype bfloat16 does both)"
            )
        self.optimizer = torch.optim.AdamW(
            trainable,
            lr=config.lr,
            betas=tuple(config.betas),  # type: ignore[arg-type]
            weight_decay=config.weight_decay,
        )
        # One process: accelerate is a pass-through (plus bf16 autocast when the config asks for
        # bf16). Under a launcher the same calls wrap the model in DDP, or shard it with FSDP
        # under configs/accelerate_fsdp.yaml (distributed.py).
        self.accelerator = make_accelerator(self.device, precision(config.dtype)[1])
        self.model, self.optimizer = self.accelerator.prepare(model, self.optimizer)
        self.reference = None
        if config.kl_coef > 0:  # the KL reference: frozen, and the initial model when given
            import copy

            frozen = (reference or copy.deepcopy(model)).eval().requires_grad_(False)
            self.reference = self._sharded_like_the_policy(frozen)

    def _sharded_like_the_policy(self, model: Any) -> Any:
        """Under FSDP the reference is sharded as the policy is (one unit per decoder layer, the
        same mixed precision), not a whole fp32 copy on every GPU; elsewhere it is as given."""
        if not is_sharded(self.accelerator):
            return model
        from accelerate.utils.fsdp_utils import fsdp2_prepare_model

        return fsdp2_prepare_model(self.accelerator, model)

    @property
    def sampling_model(self) -> Any:
        """The HF model itself (not its DDP wrapper): what in-process rollouts generate with."""
        return self.accelerator.unwrap_model(self.model)

    @classmethod
    def load(
        cls,
        path: str | Path,
        config: TrainerConfig,
        temperature: float,
        reference_path: str | Path | None = None,
    ) -> Policy:
        """Weights from a local HF folder (never a hub download), optional LoRA adapters, on
        this rank's device; `reference_path`: the KL reference's weights (the initial model)."""
        from transformers import AutoTokenizer

        from services.trainer.distributed import start_ranks

        announce("load", path, config, temperature, reference_path)
        # cuda:<local rank>, or the CPU
        device = start_ranks(config.device, config.collective_timeout_s).device
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = with_lora(causal_lm(path, config, device), config)
        reference = None
        if config.kl_coef > 0 and reference_path is not None:
            reference = causal_lm(reference_path, config, device)
        return cls(model, tokenizer, config, temperature, reference=reference)

    # -- log-probs --------------------------------------------------------------------------

    def forward(
        self, rows: Sequence[Sequence[int]], masks: Sequence[Sequence[int]], model: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probs and entropies [B, T] at generated tokens (`logprobs.py`)."""
        return token_logprobs(
            model or self.model,
            rows,
            masks,
            pad_id=self.pad_id,
            device=self.device,
            temperature=self.temperature,
            # the entropy keeps its graph only when an entropy bonus trains on it
            entropy_requires_grad=self.config.entropy_coef > 0 and torch.is_grad_enabled(),
        )

    def logprobs(
        self, samples: Sequence[TrainingSample], model: Any = None
    ) -> tuple[list[list[float]], float]:
        """No-grad log-probs of every sample's generated tokens (0 at context tokens), and the
        mean entropy on generated tokens."""
        model = model or self.model
        model.eval()
        rows = [sample.segment.token_ids for sample in samples]
        batches = micro_batches([len(r) for r in rows], self.config.micro_batch_tokens)
        mine = []  # (sample index, log-probs, entropy sum, generated tokens) of this rank's share
        with torch.no_grad(), self.accelerator.autocast():  # the reference computes as we do
            for batch in rank_share(batches):
                # a padding turn (None) runs a forward too, keeping the ranks' collectives in step
                turn = batch or batches[0]
                masks = [samples[i].segment.loss_mask for i in turn]
                logprobs, entropy = self.forward([rows[i] for i in turn], masks, model)
                for position, index in enumerate(batch or []):
                    n = len(rows[index])
                    mask = torch.tensor(samples[index].segment.loss_mask, dtype=torch.float32)
                    part = float((entropy[position, :n].cpu() * mask).sum())
                    mine.append((index, logprobs[position, :n].tolist(), part, int(mask.sum())))
        out: list[list[float]] = [[] for _ in samples]
        entropy_sum, generated = 0.0, 0
        for index, row, entropy_part, count in gather_lists(mine):
            out[index] = row
            entropy_sum += entropy_part
            generated += count
        return out, entropy_sum / max(generated, 1)

    # -- the update -------------------------------------------------------------------------

    def train_step(self, episodes: Sequence[Sequence[TrainingSample]]) -> UpdateStats:
        """All updates of one rollout step; `episodes` holds each admitted episode's samples,
        in group order. Under ranks the leader's episodes go to every rank with the call."""
        announce("train_step", episodes)
        config = self.config
        samples = [sample for episode in episodes for sample in episode]
        if torch.device(self.device).type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        began = time.perf_counter()
        old, entropy = self.logprobs(samples)
        reference = self.logprobs(samples, self.reference)[0] if self.reference else None
        old_s = time.perf_counter() - began
        differences = sampler_differences(samples, old)
        weights = (
            importance_weights(samples, old, config.rollout_servers)
            if config.importance_sampling
            else None
        )

        began = time.perf_counter()
        index_of = {id(sample): index for index, sample in enumerate(samples)}
        results = []
        for start in range(0, len(episodes), config.global_batch):
            chunk = [
                s for episode in episodes[start : start + config.global_batch] for s in episode
            ]
            indices = [index_of[id(sample)] for sample in chunk]
            results.append(optimizer_update(self, chunk, old, reference, weights, indices))
        update_s = time.perf_counter() - began
        new, _ = self.logprobs(samples)
        generated = sum(sample.segment.generated_tokens for sample in samples)
        return UpdateStats(
            loss=sum(r[0] for r in results) / len(results),
            clip_fraction=sum(r[1] for r in results) / len(results),
            grad_norm=sum(r[2] for r in results) / len(results),
            entropy=entropy,
            logprob_mismatch=sum(differences) / len(differences) if differences else math.nan,
            logprob_mismatch_max=max(differences, default=math.nan),
            importance_weight=masked_summary(samples, weights) if weights else None,
            kl_to_old=mean_masked_difference(samples, old, new),
            updates=len(results),
            samples=len(samples),
            generated_tokens=generated,
            tokens=sum(len(sample.segment.token_ids) for sample in samples),
            old_logprobs_s=old_s,
            update_s=update_s,
            ranks=world()[1],
            rank_weight_spread=rank_weight_spread(self.accelerator, self.model),
            peak_gpu_memory_gb=peak_gpu_memory_gb(self.device),
        )

    # -- persistence (`saving.py`) ------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """HF weights (safetensors, fp32 masters) and tokenizer, plus the optimizer state."""
        announce("save", folder)
        save_weights(self.accelerator, self.model, folder, tokenizer=self.tokenizer)
        save_optimizer(self.accelerator, self.model, self.optimizer, folder / OPTIMIZER_FILE)

    def save_weights(self, folder: Path) -> None:
        """HF weights and tokenizer, written once (a collective under ranks)."""
        announce("save_weights", folder)
        save_weights(self.accelerator, self.model, folder, tokenizer=self.tokenizer)

    def push_weights(self, folder: Path) -> None:
        """The weights a rollout server reloads: in the servers' dtype, with the tied-head file
        only for CPU servers (`[rollout_servers]` push_dtype, server_device)."""
        announce("push_weights", folder)
        servers = self.config.rollout_servers
        save_weights(
            self.accelerator,
            self.model,
            folder,
            dtype=getattr(torch, servers.push_dtype),
            tied_head_file=servers.server_device == "cpu",
            tokenizer=self.tokenizer,
        )

    def load_optimizer(self, folder: Path) -> None:
        announce("load_optimizer", folder)
        path = folder / OPTIMIZER_FILE
        if path.is_file():  # under FSDP a collective: every rank sees the same folder
            load_optimizer(self.accelerator, self.model, self.optimizer, path)
