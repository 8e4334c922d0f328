"""The SFT itself: TRL's `SFTTrainer` on the pre-tokenized examples, resumable from its last
checkpoint, computing in the weights' dtype."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from services.trainer.warm_start.plan import (
    WarmStartPlan,
)


def build_trainer(
    base_dir: Path,
    examples: Sequence[dict[str, list[int]]],
    plan: WarmStartPlan,
    work_dir: Path,
    callbacks: Sequence[Any] = (),
) -> Any:
    """TRL's SFTTrainer on the pre-tokenized examples (labels -100 wherever the mask is 0)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        base_dir, dtype=getattr(torch, plan.dtype), local_files_only=True
    )
    steps_per_epoch = max(1, len(examples) // plan.batch_size)
    args = SFTConfig(
        output_dir=str(work_dir),
        num_train_epochs=plan.epochs,
        # Micro-batches of one example, accumulated: no padding compute on a CPU.
        per_device_train_batch_size=1,
        gradient_accumulation_steps=plan.batch_size,
        learning_rate=plan.lr,
        lr_scheduler_type="linear",
        warmup_steps=max(1, steps_per_epoch // 10),
        weight_decay=0.0,
        max_length=plan.max_length,
        shuffle_dataset=True,
        seed=plan.seed,
        data_seed=plan.seed,
        logging_steps=1,
        save_strategy="steps",
        save_steps=max(1, steps_per_epoch // 2),
        save_total_limit=1,
        report_to=[],
        disable_tqdm=True,
        # The weights' dtype (plan.dtype) is the compute dtype. TRL's SFTConfig defaults to bf16
        # autocast and activation checkpointing: on a CPU without bf16 units that runs every
        # matmul through ATen's scalar fallback (measured ~20x slower than fp32), and the
        # recomputation costs a third more for memory a 135M model does not need.
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        use_cpu=plan.device == "cpu",
        dataloader_num_workers=0,
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(list(examples)),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )


def run_sft(
    base_dir: Path,
    examples: Sequence[dict[str, list[int]]],
    plan: WarmStartPlan,
    work_dir: Path,
    out_dir: Path,
    report: Callable[..., None] | None = None,
) -> dict[str, Any]:
    """Train, resuming from `work_dir`'s last checkpoint; save the weights to `out_dir`."""
    from transformers import TrainerCallback

    history: list[dict[str, float]] = []
    show = report or (lambda **_: None)

    class _Progress(TrainerCallback):
        """Reports optimizer steps to the progress bar; keeps the loss log for the summary."""

        def on_train_begin(self, args, state, control, **kwargs):
            show(total=state.max_steps, completed=state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            show(completed=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                history.append({"step": state.global_step, "loss": float(logs["loss"])})
                show(description=f"SFT (loss {logs['loss']:.3f})")

    trainer = build_trainer(base_dir, examples, plan, work_dir, [_Progress()])
    resume = any(work_dir.glob("checkpoint-*"))
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - started
    trainer.save_model(str(out_dir))
    trainer.processing_class.save_pretrained(str(out_dir))
    tokens = sum(len(example["input_ids"]) for example in examples)
    return {
        "train_seconds": round(seconds, 1),
        "optimizer_steps": output.global_step,
        "examples": len(examples),
        "tokens_per_epoch": tokens,
        "loss_tokens_per_epoch": sum(sum(example["assistant_masks"]) for example in examples),
        "tokens_per_second": round(tokens * plan.epochs / seconds, 1) if seconds > 0 else None,
        "resumed": resume,
        "loss_history": history,
    }
