"""End to end with a real model: the runner plus the transformers backend on the tiny model.

The tiny model gets a bias towards its end-of-turn token (a forward hook on the output layer), so
its random replies are short, end with a stop token, and episodes run several turns of protocol
errors until the step cap: enough to check exact tokens across turns with KV reuse.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from shared.runtime.agent.backends.transformers_backend import TransformersBackend  # noqa: E402
from shared.runtime.agent.decoding import DecodingConfig  # noqa: E402
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine  # noqa: E402
from tests.agent.doubles import ScriptedShop  # noqa: E402


@pytest.fixture(scope="module")
def chatty_backend(tiny_dir):
    backend = TransformersBackend.from_pretrained(tiny_dir, dtype="float64", max_batch_size=3)
    eos = backend.renderer.tokenizer.eos_token_id
    bias = torch.zeros(backend.model.config.vocab_size, dtype=torch.float64)
    bias[eos] = 6.0
    handle = backend.model.lm_head.register_forward_hook(
        lambda module, inputs, output: output + bias
    )
    yield backend
    handle.remove()


def test_multi_turn_rollout_keeps_exact_tokens(chatty_backend) -> None:
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-text-v1",
        decoding=DecodingConfig(temperature=1.0, max_new_tokens=24, seed=7),
        concurrency=4,
        max_turns=4,
    )
    engine = RolloutEngine(ScriptedShop(), chatty_backend, config)
    specs = [EpisodeSpec(f"t{i}", seed=i, group_id="g") for i in range(5)]
    trajectories = engine.run(specs)
    assert all(t.scored for t in trajectories)
    assert {t.termination for t in trajectories} <= {"action_limit", "generation_length"}
    multi_turn = [t for t in trajectories if len(t.steps) > 1]
    assert multi_turn, "expected some episodes to run several turns"
    for trajectory in trajectories:
        assert trajectory.exact_tokens
        assert len(trajectory.segments) == 1  # text protocol: the template never re-renders history
        segment = trajectory.segments[0]
        ids = torch.tensor([segment.token_ids])
        with torch.no_grad():
            logits = chatty_backend.model(input_ids=ids).logits[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        for position, (token, mask, recorded) in enumerate(
            zip(segment.token_ids, segment.loss_mask, segment.logprobs, strict=True)
        ):
            if mask:
                assert recorded == pytest.approx(float(logprobs[position - 1, token]), abs=1e-8)
        assert sum(segment.loss_mask) == trajectory.token_counts["generated_tokens"]
    # Later turns reused the KV cache of earlier ones.
    assert engine.stats.cached_tokens > 0
    assert sum(t.token_counts["cached_tokens"] for t in multi_turn) > 0
    assert engine.stats.generate_s > 0 and engine.stats.wall_s >= engine.stats.generate_s
