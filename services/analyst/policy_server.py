"""The frozen checkpoint on a shared policy server (ANALYST_POLICY_SERVER_URL, deploy/'s
vllm-eval): loaded into the server first, then pinned, so no model loads in the analyst.

The server is shared with the evaluator's gates, which load their own checkpoint into it. A
round's compile and its gate run one after the other (the trainer waits for the compile), so
they do not meet; anything else that reloads the server mid-job (an operator's evaluation) makes
the next batch fail the job instead of mixing two checkpoints in one round's retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Reloading a 4B model from a network volume takes minutes (the evaluator waits as long).
LOAD_TIMEOUT_S = 1800.0


class PinnedServerPolicy:
    """An OpenAI backend whose server must serve one checkpoint: its `/weight_info` is checked
    before and after every batch of turns."""

    def __init__(self, backend: Any, root: str, checkpoint_id: str, api_key: str | None) -> None:
        self.backend, self.root, self.pinned = backend, root, checkpoint_id
        self.api_key = api_key

    def __getattr__(self, name: str) -> Any:  # everything else is the backend's
        return getattr(self.backend, name)

    def check(self) -> None:
        from shared.runtime.vllm_weights import require_version, server_client

        with server_client(self.api_key, 30.0) as client:
            require_version(client, self.root, self.pinned)

    def generate(self, requests: Sequence[Any], decoding: Any) -> list[Any]:
        self.check()
        outputs = self.backend.generate(requests, decoding)
        self.check()
        return outputs


def served_policy(spec, settings) -> PinnedServerPolicy:
    """Load `spec`'s checkpoint (its weights uri: a folder the server mounts at the same path)
    into the policy server and return it pinned there; raises unless the server then serves it."""
    import httpx

    from shared.runtime.agent.backends import make_backend
    from shared.runtime.vllm_weights import load_weights, server_client, server_root

    if not spec.weights_uri:
        raise LookupError(f"checkpoint {spec.checkpoint_id!r} has no weights uri to load")
    key = settings.policy_server_api_key
    api_key = key.get_secret_value() if key else None
    url, root = settings.policy_server_url, server_root(settings.policy_server_url)
    with server_client(api_key, httpx.Timeout(LOAD_TIMEOUT_S, connect=10.0)) as client:
        load_weights(client, root, spec.weights_uri.removeprefix("file://"), spec.checkpoint_id)
    backend = make_backend(
        "openai",
        settings.policy_server_model,
        base_url=url,
        checkpoint_id=spec.checkpoint_id,
        api_key=api_key,
        **settings.backend_options,
    )
    return PinnedServerPolicy(backend, root, spec.checkpoint_id, api_key)
