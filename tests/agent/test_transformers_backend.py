"""The transformers backend on the tiny model: exact log-probs, KV reuse, batching, seeds."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest  # noqa: E402
from shared.runtime.agent.backends.transformers_backend import TransformersBackend, sample_token  # noqa: E402
from shared.runtime.agent.decoding import DecodingConfig  # noqa: E402

DECODING = DecodingConfig(temperature=0.8, max_new_tokens=10, seed=0)


@pytest.fixture(scope="module")
def backend(tiny_dir):
    # float64 so that batched and unbatched paths agree to ~1e-12 and sampled tokens never flip.
    return TransformersBackend.from_pretrained(tiny_dir, dtype="float64")


@pytest.fixture(scope="module")
def fresh_backend(tiny_dir):
    return TransformersBackend.from_pretrained(tiny_dir, dtype="float64", kv_reuse=False)


def recomputed_logprobs(model, prompt_ids, generated, temperature):
    """Log-probs of `generated` after `prompt_ids` from one full forward pass, no cache."""
    ids = torch.tensor([list(prompt_ids) + list(generated)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    start = len(prompt_ids)
    return [float(logprobs[start + i - 1, token]) for i, token in enumerate(generated)]


def conversation(index: int):
    return [
        {"role": "system", "content": "You shop." + " persona" * (3 * index)},
        {"role": "user", "content": f"Task {index}: buy shoes." + " x" * index},
    ]


def run_turns(backend, turns: int, episodes=(0, 1, 2), key_prefix="k", batch=True):
    """Drive episodes through `turns` turns as the runtime does; returns outputs per turn."""
    renderer = backend.renderer
    messages = {i: conversation(i) for i in episodes}
    contexts = {i: None for i in episodes}
    history = []
    for turn in range(turns):
        prompts = {i: renderer.prompt(messages[i], None, contexts[i]) for i in episodes}
        requests = [
            TurnRequest(
                f"{key_prefix}{i}",
                tuple(messages[i]),
                None,
                DECODING.max_new_tokens,
                seed=1000 * i + turn,
                prompt_ids=prompts[i].ids,
            )
            for i in episodes
        ]
        if batch:
            outputs = backend.generate(requests, DECODING)
        else:
            outputs = [backend.generate([request], DECODING)[0] for request in requests]
        history.append(dict(zip(episodes, outputs, strict=True)))
        for i, output in zip(episodes, outputs, strict=True):
            assert isinstance(output, TurnOutput)
            contexts[i] = renderer.extend(prompts[i], output.token_ids)
            messages[i] = [
                *messages[i],
                output.assistant_message,
                {"role": "user", "content": f"observation {turn} for {i}"},
            ]
    for i in episodes:
        backend.release(f"{key_prefix}{i}")
    return history


def test_logprobs_are_exact_across_turns_with_kv_reuse(backend) -> None:
    history = run_turns(backend, turns=3)
    for outputs in history:
        for output in outputs.values():
            expected = recomputed_logprobs(backend.model, output.prompt_ids, output.token_ids, 0.8)
            assert output.logprobs == pytest.approx(expected, abs=1e-8)
            assert output.cached_tokens < len(output.prompt_ids)
    # From the second turn the previous prompt and generation were reused, not recomputed.
    for previous, current in itertools.pairwise(history):
        for i, output in current.items():
            before = previous[i]
            assert output.prompt_ids[: len(before.prompt_ids) + len(before.token_ids)] == (
                before.prompt_ids + before.token_ids
            )
            assert output.cached_tokens == len(before.prompt_ids) + len(before.token_ids) - 1


def test_kv_reuse_and_batching_do_not_change_tokens(backend, fresh_backend) -> None:
    reused = run_turns(backend, turns=3, key_prefix="a")
    recomputed = run_turns(fresh_backend, turns=3, key_prefix="b")
    alone = run_turns(backend, turns=3, key_prefix="c", batch=False)
    for first, second, third in zip(reused, recomputed, alone, strict=True):
        for i in first:
            assert first[i].token_ids == second[i].token_ids == third[i].token_ids
            assert first[i].logprobs == pytest.approx(second[i].logprobs, abs=1e-8)
    assert all(output.cached_tokens == 0 for turn in recomputed for output in turn.values())


def test_siblings_share_their_prompt_prefill(tiny_dir) -> None:
    backend = TransformersBackend.from_pretrained(tiny_dir, dtype="float64")
    prompt = backend.renderer.prompt(conversation(2), None, None).ids
    first, second = backend.generate(
        [TurnRequest(f"sib{i}", (), None, 6, seed=i, prompt_ids=prompt) for i in range(2)], DECODING
    )
    assert first.cached_tokens == 0 and second.cached_tokens == len(prompt) - 1
    for output in (first, second):
        expected = recomputed_logprobs(backend.model, prompt, output.token_ids, 0.8)
        assert output.logprobs == pytest.approx(expected, abs=1e-8)
    # One at a time: a finished sibling's state serves the next one.
    backend.release("sib0")
    backend.release("sib1")
    [third] = backend.generate(
        [TurnRequest("sib2", (), None, 6, seed=2, prompt_ids=prompt)], DECODING
    )
    assert third.cached_tokens == len(prompt) - 1
    assert third.logprobs == pytest.approx(
        recomputed_logprobs(backend.model, prompt, third.token_ids, 0.8), abs=1e-8
    )
    backend.clear_cache()
    [fourth] = backend.generate(
        [TurnRequest("sib3", (), None, 6, seed=2, prompt_ids=prompt)], DECODING
    )
    assert fourth.cached_tokens == 0 and fourth.token_ids == third.token_ids


def test_a_finished_episode_keeps_only_its_own_kv_state(tiny_dir) -> None:
    """A pooled context must not pin the decode batch it came from: in a long-lived service
    pooled views of SmolLM2 slabs grew to ~7 GB and the analyst was killed for memory."""
    backend = TransformersBackend.from_pretrained(tiny_dir, dtype="float64")
    run_turns(backend, turns=2, episodes=(0, 1, 2, 3), key_prefix="pool")
    assert len(backend._pool) == 4
    for context in backend._pool.values():
        for keys, values in context.layers:
            for tensor in (keys, values):
                assert tensor.shape[-2] == len(context.ids)
                own = tensor.numel() * tensor.element_size()
                assert tensor.untyped_storage().nbytes() == own


def test_seeds_decide_samples(backend) -> None:
    prompt = backend.renderer.prompt(conversation(0), None, None).ids

    def sample(seed: int, key: str):
        request = TurnRequest(key, (), None, 10, seed=seed, prompt_ids=prompt)
        output = backend.generate([request], DECODING)[0]
        backend.release(key)
        return output.token_ids

    assert sample(5, "x") == sample(5, "y")
    assert sample(5, "x") != sample(6, "x")


def test_stop_and_length_limits(backend) -> None:
    prompt = backend.renderer.prompt(conversation(1), None, None).ids
    outputs = backend.generate(
        [TurnRequest(f"s{seed}", (), None, 3, seed=seed, prompt_ids=prompt) for seed in range(6)],
        DECODING,
    )
    for output in outputs:
        assert isinstance(output, TurnOutput)
        assert 1 <= len(output.token_ids) <= 3
        stopped = output.token_ids[-1] in backend.renderer.stop_token_ids
        assert output.finish_reason == ("stop" if stopped else "length")
        assert all(token not in backend.renderer.stop_token_ids for token in output.token_ids[:-1])
    for seed in range(6):
        backend.release(f"s{seed}")


def test_one_bad_request_fails_alone(backend) -> None:
    prompt = backend.renderer.prompt(conversation(0), None, None).ids
    outputs = backend.generate(
        [
            TurnRequest("good", (), None, 4, seed=1, prompt_ids=prompt),
            TurnRequest("empty", (), None, 4, seed=1, prompt_ids=()),
            TurnRequest("none", (), None, 4, seed=1, prompt_ids=None),
            TurnRequest("huge-id", (), None, 4, seed=1, prompt_ids=(10**7,)),
        ],
        DECODING,
    )
    assert isinstance(outputs[0], TurnOutput)
    assert all(isinstance(output, TurnFailure) for output in outputs[1:])
    backend.release("good")


def test_sampling_rule() -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    generator = torch.Generator().manual_seed(0)
    greedy = DecodingConfig(temperature=0.0)
    token, logprob = sample_token(logits, greedy, generator)
    assert token == 0 and logprob == pytest.approx(float(torch.log_softmax(logits, -1)[0]))
    top1 = DecodingConfig(temperature=1.0, top_k=1)
    assert {sample_token(logits, top1, generator)[0] for _ in range(20)} == {0}
    nucleus = DecodingConfig(temperature=1.0, top_p=0.5)  # p(token 0) = 0.61 > 0.5
    assert {sample_token(logits, nucleus, generator)[0] for _ in range(20)} == {0}
    full = DecodingConfig(temperature=2.0)
    tokens = {sample_token(logits, full, generator)[0] for _ in range(200)}
    assert tokens == {0, 1, 2, 3}
    token, logprob = sample_token(logits, full, generator)
    assert logprob == pytest.approx(float(torch.log_softmax(logits / 2.0, -1)[token]))
