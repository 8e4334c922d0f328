"""The policy the trainer owns: weights, token log-probs, and the GRPO update.

One rollout step admits `groups_admitted` groups; their episodes, in group order, are cut into
global batches of `global_batch` episodes (a whole number of groups), one optimizer update each.
Before the first update every sample's log-probs are recomputed with the weights that sampled
them ("old" log-probs); both updates of the step use those, so the second update's ratio
measures how far the first one moved the policy. The backend's sampling log-probs give the
mismatch metric (sampler vs trainer numerics) and, with rollout servers, the truncated
importance weights that correct the loss for that mismatch (`loss.importance_sampling_weights`).

Logits only where the loss needs them: the vocabulary projection is the update's largest tensor
(tokens x vocabulary, in fp32 for the log-softmax), and most of an episode's tokens are prompt,
persona and page text that carry no loss. The forward asks the model for logits at the positions
that score a generated token only (`logits_to_keep` as a boolean mask), so that tensor scales
with the generated tokens, not the episode's length.

TRL piece used: `selective_log_softmax_and_entropy` (per-token log-probs and entropies in one
pass, without materialising the full log-softmax). The loss is ours (`loss.py`), as is the batching.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from trl.trainer.utils import selective_log_softmax_and_entropy

from services.trainer.config import TrainerConfig
from services.trainer.distributed import (
    announce,
    gather_lists,
    is_sharded,
    load_optimizer,
    make_accelerator,
    precision,
    rank_share,
    save_optimizer,
    save_weights,
    world,
)
from services.trainer.loss import clipped_surrogate_loss, importance_sampling_weights
from shared.agent.advantage import TrainingSample

OPTIMIZER_FILE = "optimizer.pt"


@dataclass(frozen=True)
class UpdateStats:
    """What one rollout step's updates measured (means over updates)."""

    loss: float
    clip_fraction: float
    grad_norm: float
    entropy: float
    logprob_mismatch: float
    """mean |trainer old log-prob - sampling log-prob| over generated tokens"""
    logprob_mismatch_max: float
    """the largest |trainer old log-prob - sampling log-prob| over generated tokens"""
    importance_weight: dict[str, float] | None
    """min, mean and max of the importance weights over generated tokens (None: no correction)"""
    kl_to_old: float
    """mean (old - new) log-prob on generated tokens after the step's updates (slime's ppo_kl)"""
    updates: int
    samples: int
    generated_tokens: int
    tokens: int
    old_logprobs_s: float
    update_s: float
    ranks: int = 1
    rank_weight_spread: float | None = 0.0
    """after the step, the largest spread across ranks of a parameter's float64 sum: 0.0 when
    every rank holds the same weights; None under FSDP (each rank holds a shard)"""
    peak_gpu_memory_gb: float | None = None
    """the step's peak allocated accelerator memory (None on the CPU)"""


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

            self.reference = (reference or copy.deepcopy(model)).eval().requires_grad_(False)

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
        device = start_ranks(config.device, 1800.0).device  # cuda:<local rank>, or the CPU
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = _causal_lm(path, config, device)
        reference = None
        if config.kl_coef > 0 and reference_path is not None:
            reference = _causal_lm(reference_path, config, device)
        if config.lora.enabled:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(
                model,
                LoraConfig(
                    r=config.lora.rank,
                    lora_alpha=config.lora.alpha,
                    lora_dropout=config.lora.dropout,
                    target_modules=list(config.lora.target_modules),
                    task_type="CAUSAL_LM",
                ),
            )
        return cls(model, tokenizer, config, temperature, reference=reference)

    # -- log-probs --------------------------------------------------------------------------

    def _forward(
        self, rows: Sequence[Sequence[int]], masks: Sequence[Sequence[int]], model: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probs [B, T] and entropies [B, T] of right-padded rows (position t scores
        token t given < t), computed at generated tokens (loss mask 1) only, 0 elsewhere."""
        model = model or self.model
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
            attention[index, : len(row)] = 1
        ids, attention = ids.to(self.device), attention.to(self.device)
        scored = _padded(masks, width, self.device) > 0  # [B, T]: the tokens that carry loss
        scored[:, 0] = False  # nothing scores the first token
        # The logits at position p score token p + 1. A boolean `logits_to_keep` makes the model
        # project only those hidden states onto the vocabulary: logits [N generated, V].
        before = torch.zeros_like(scored)
        before[:, :-1] = scored[:, 1:]
        if not bool(before.any()):
            # Nothing scored: one position still runs the forward, so a loss keeps its graph and
            # every rank joins the same collectives; masked_scatter below uses none of it.
            before[0, 0] = True
        logits = model(input_ids=ids, attention_mask=attention, logits_to_keep=before).logits
        # the sampler's distribution is log_softmax(logits / T); fp32 for the log-softmax
        logprobs, entropy = selective_log_softmax_and_entropy(
            logits.float(),
            # the token each kept position scores, row-major as the model flattened them
            ids.roll(-1, dims=1)[before],
            # the entropy keeps its graph only when an entropy bonus trains on it
            entropy_requires_grad=self.config.entropy_coef > 0 and torch.is_grad_enabled(),
            temperature=self.temperature,
        )
        zeros = torch.zeros((len(rows), width), dtype=logprobs.dtype, device=self.device)
        return zeros.masked_scatter(scored, logprobs), zeros.masked_scatter(scored, entropy)

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
                logprobs, entropy = self._forward([rows[i] for i in turn], masks, model)
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
        differences = _sampler_differences(samples, old)
        weights = self._importance_weights(samples, old) if config.importance_sampling else None

        began = time.perf_counter()
        index_of = {id(sample): index for index, sample in enumerate(samples)}
        results = []
        for start in range(0, len(episodes), config.global_batch):
            chunk = [
                s for episode in episodes[start : start + config.global_batch] for s in episode
            ]
            indices = [index_of[id(sample)] for sample in chunk]
            results.append(self._update(chunk, old, reference, weights, indices))
        update_s = time.perf_counter() - began
        new, _ = self.logprobs(samples)
        kl = _mean_masked_difference(samples, old, new)
        generated = sum(sample.segment.generated_tokens for sample in samples)
        return UpdateStats(
            loss=sum(r[0] for r in results) / len(results),
            clip_fraction=sum(r[1] for r in results) / len(results),
            grad_norm=sum(r[2] for r in results) / len(results),
            entropy=entropy,
            logprob_mismatch=sum(differences) / len(differences) if differences else math.nan,
            logprob_mismatch_max=max(differences, default=math.nan),
            importance_weight=_masked_summary(samples, weights) if weights else None,
            kl_to_old=kl,
            updates=len(results),
            samples=len(samples),
            generated_tokens=generated,
            tokens=sum(len(sample.segment.token_ids) for sample in samples),
            old_logprobs_s=old_s,
            update_s=update_s,
            ranks=world()[1],
            rank_weight_spread=self._rank_weight_spread(),
            peak_gpu_memory_gb=_peak_gpu_memory_gb(self.device),
        )

    def _rank_weight_spread(self) -> float | None:
        if world()[1] == 1:
            return 0.0
        if is_sharded(self.accelerator):
            return None
        sums = [float(p.detach().double().sum()) for p in self.sampling_model.parameters()]
        every = gather_lists([sums])
        return max(max(values) - min(values) for values in zip(*every, strict=True))

    def _importance_weights(
        self, samples: Sequence[TrainingSample], old: Sequence[Sequence[float]]
    ) -> list[list[float]]:
        """Per token, the truncated weight exp(trainer old - sampling) of each sample."""
        servers = self.config.rollout_servers
        out = []
        for sample, row in zip(samples, old, strict=True):
            segment = sample.segment
            weights = importance_sampling_weights(
                torch.tensor([row], dtype=torch.float64),
                torch.tensor([segment.logprobs], dtype=torch.float64),
                torch.tensor([segment.loss_mask]),
                mode=servers.importance_sampling_mode,
                clip_min=servers.importance_sampling_clip_min or None,
                clip_max=servers.importance_sampling_clip_max,
            )
            out.append(weights[0].tolist())
        return out

    def _update(
        self,
        samples: Sequence[TrainingSample],
        old: Sequence[Sequence[float]],
        reference: Sequence[Sequence[float]] | None,
        weights: Sequence[Sequence[float]] | None,
        indices: Sequence[int],
    ) -> tuple[float, float, float]:
        """One optimizer update, micro-batched; returns (loss, clip fraction, grad norm).

        `old`, `reference` and `weights` are indexed like the step's samples; `indices` maps
        this update's samples to them."""
        config = self.config
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        totals = {
            "total_samples": len(samples),
            "total_tokens": max(sum(s.segment.generated_tokens for s in samples), 1),
        }
        loss_sum, clip_sum = 0.0, 0.0
        rows = [sample.segment.token_ids for sample in samples]
        batches = micro_batches([len(r) for r in rows], config.micro_batch_tokens)
        # DDP / FSDP average gradients over ranks, and each rank's losses are parts of the one
        # loss of the global batch: scaling by the rank count makes the average their sum
        ranks = world()[1]
        for share in rank_share(batches):
            batch = share or batches[0]  # a padding turn: a zero loss, the same collectives
            masks = [samples[i].segment.loss_mask for i in batch]
            logprobs, entropy = self._forward([rows[i] for i in batch], masks)
            width = logprobs.shape[1]
            mask = _padded(masks, width, self.device)
            old_t = _padded([old[indices[i]] for i in batch], width, self.device)
            weights_t = (
                _padded([weights[indices[i]] for i in batch], width, self.device)
                if weights is not None
                else None
            )
            advantages = torch.tensor(
                [samples[i].advantage for i in batch], dtype=torch.float32, device=self.device
            )
            out = clipped_surrogate_loss(
                logprobs,
                old_t,
                advantages,
                mask,
                clip_low=config.clip_low,
                clip_high=config.clip_high,
                aggregation=config.aggregation,
                importance_weights=weights_t,
                **totals,
            )
            loss = out.loss
            if self.reference is not None and reference is not None:
                ref = _padded([reference[indices[i]] for i in batch], width, self.device)
                # k3 estimator of KL(policy || reference) per generated token
                delta = ref - logprobs
                kl = torch.exp(delta) - delta - 1
                loss = loss + config.kl_coef * _aggregate(kl, mask, config.aggregation, totals)
            if config.entropy_coef > 0:  # a bonus: higher entropy lowers the loss
                loss = loss - config.entropy_coef * _aggregate(
                    entropy, mask, config.aggregation, totals
                )
            if share is None:
                self.accelerator.backward(loss * 0.0)
                continue
            self.accelerator.backward(loss * ranks)
            loss_sum += float(loss.detach())
            clip_sum += float(out.clip_fraction)
        if ranks > 1:
            sums = torch.tensor([loss_sum, clip_sum], dtype=torch.float64, device=self.device)
            loss_sum, clip_sum = self.accelerator.reduce(sums, reduction="sum").tolist()
        grad_norm = self.accelerator.clip_grad_norm_(
            [p for p in self.model.parameters() if p.requires_grad], config.grad_clip
        )
        self.optimizer.step()
        self.model.eval()
        return loss_sum, clip_sum, float(grad_norm)

    # -- persistence ------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """HF weights (safetensors) and tokenizer, plus the optimizer state for resume."""
        announce("save", folder)
        self._write_weights(folder)
        save_optimizer(self.accelerator, self.model, self.optimizer, folder / OPTIMIZER_FILE)

    def save_weights(self, folder: Path) -> None:
        """HF weights (safetensors) and tokenizer, written once (a collective under ranks)."""
        announce("save_weights", folder)
        self._write_weights(folder)

    def _write_weights(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        save_weights(self.accelerator, self.model, folder)
        if self.accelerator.is_main_process:
            self.tokenizer.save_pretrained(folder)

    def load_optimizer(self, folder: Path) -> None:
        announce("load_optimizer", folder)
        path = folder / OPTIMIZER_FILE
        if path.is_file():  # under FSDP a collective: every rank sees the same folder
            load_optimizer(self.accelerator, self.model, self.optimizer, path)


def _causal_lm(path: str | Path, config: TrainerConfig, device: Any) -> Any:
    from transformers import AutoModelForCausalLM

    dtype = precision(config.dtype)[0]  # bf16 configs load fp32 masters (distributed.py)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=getattr(torch, dtype), local_files_only=True
    )
    return model.to(device)


def _padded(rows: Sequence[Sequence[float]], width: int, device: Any) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(device)


def _aggregate(values: torch.Tensor, mask: torch.Tensor, aggregation: str, totals: dict) -> Any:
    from services.trainer.loss import aggregate

    return aggregate(values, mask, aggregation, **totals)


def _sampler_differences(
    samples: Sequence[TrainingSample], old: Sequence[Sequence[float]]
) -> list[float]:
    """|trainer old log-prob - sampling log-prob| of every generated token."""
    return [
        abs(recomputed - sampled)
        for sample, row in zip(samples, old, strict=True)
        for mask, sampled, recomputed in zip(
            sample.segment.loss_mask, sample.segment.logprobs, row, strict=True
        )
        if mask
    ]


def _masked_summary(
    samples: Sequence[TrainingSample], values: Sequence[Sequence[float]]
) -> dict[str, float]:
    """min, mean and max of per-token values over generated tokens."""
    kept = [
        value
        for sample, row in zip(samples, values, strict=True)
        for mask, value in zip(sample.segment.loss_mask, row, strict=True)
        if mask
    ]
    if not kept:
        return {"min": math.nan, "mean": math.nan, "max": math.nan}
    return {"min": min(kept), "mean": sum(kept) / len(kept), "max": max(kept)}


def _peak_gpu_memory_gb(device: Any) -> float | None:
    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


def _mean_masked_difference(
    samples: Sequence[TrainingSample],
    old: Sequence[Sequence[float]],
    new: Sequence[Sequence[float]],
) -> float:
    total, count = 0.0, 0
    for sample, before, after in zip(samples, old, new, strict=True):
        for mask, a, b in zip(sample.segment.loss_mask, before, after, strict=True):
            if mask:
                total += a - b
                count += 1
    return total / count if count else math.nan
