"""The policy's weights from a local HF folder (never a hub download): fp32 masters under a bf16
config (`distributed.precision`), on this rank's device, with optional LoRA adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from services.trainer.config import TrainerConfig
from services.trainer.distributed import precision


def causal_lm(path: str | Path, config: TrainerConfig, device: Any) -> Any:
    from transformers import AutoModelForCausalLM

    dtype = precision(config.dtype)[0]  # bf16 configs load fp32 masters
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=getattr(torch, dtype), local_files_only=True
    )
    return model.to(device)


def with_lora(model: Any, config: TrainerConfig) -> Any:
    """`model` with peft LoRA adapters when the config enables them (only they train)."""
    if not config.lora.enabled:
        return model
    from peft import LoraConfig, get_peft_model

    return get_peft_model(
        model,
        LoraConfig(
            r=config.lora.rank,
            lora_alpha=config.lora.alpha,
            lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules),
            task_type="CAUSAL_LM",
        ),
    )
