"""Policy backends behind one interface (`base.PolicyBackend`): transformers, vllm, openai.

Backends import their heavy dependencies lazily, so importing this package never loads torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.runtime.agent.backends.base import PolicyBackend

# procedural and simulated are test doubles, never models
BACKENDS = ("transformers", "vllm", "openai", "procedural", "simulated")


def make_backend(
    kind: str,
    model: str,
    *,
    cache_dir: str | Path | None = None,
    base_url: str | None = None,
    checkpoint_id: str | None = None,
    **options: Any,
) -> PolicyBackend:
    """A backend by name.

    `model` is 'smollm2', 'tiny' or a model directory for the in-process backends, or the served
    model's name for openai (with `base_url`). Other options go to the backend's constructor.
    """
    if kind == "procedural":  # a TEST DOUBLE that follows recognised skill chunks, no model
        from shared.runtime.agent.backends.procedural import ProceduralPolicy

        return ProceduralPolicy(model, checkpoint_id=checkpoint_id, **options)
    if kind == "simulated":  # a TEST DOUBLE: `model` is a folder with simulated-policy.json
        from shared.runtime.agent.backends.simulated import SimulatedBackend

        return SimulatedBackend.from_checkpoint(model, checkpoint_id=checkpoint_id, **options)
    if kind == "openai":
        if not base_url:
            raise ValueError("the openai backend needs base_url")
        from shared.runtime.agent.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(base_url, model, checkpoint_id=checkpoint_id, **options)
    from shared.runtime.agent.models import DEFAULT_CACHE, resolve_model

    path = resolve_model(model, cache_dir or DEFAULT_CACHE)
    if kind == "transformers":
        from shared.runtime.agent.backends.transformers_backend import TransformersBackend

        return TransformersBackend.from_pretrained(path, checkpoint_id=checkpoint_id, **options)
    if kind == "vllm":
        from shared.runtime.agent.backends.vllm_backend import VLLMBackend

        return VLLMBackend.from_pretrained(path, checkpoint_id=checkpoint_id, **options)
    raise ValueError(f"unknown backend {kind!r}; known: {', '.join(BACKENDS)}")
