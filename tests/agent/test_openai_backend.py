"""The OpenAI-compatible backend against a real local HTTP server wrapping the tiny model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from shared.agent.backends.base import TurnFailure, TurnOutput, TurnRequest  # noqa: E402
from shared.agent.backends.openai_backend import OpenAIBackend, parse_completion  # noqa: E402
from shared.agent.backends.transformers_backend import TransformersBackend  # noqa: E402
from shared.agent.decoding import DecodingConfig  # noqa: E402
from shared.agent.runner import EpisodeSpec, RolloutConfig, run_episodes  # noqa: E402
from tests.agent.doubles import ScriptedShop  # noqa: E402
from tests.agent.openai_server import Behaviour, ServerThread, make_app  # noqa: E402

DECODING = DecodingConfig(temperature=1.0, max_new_tokens=16, seed=1)


@pytest.fixture(scope="module")
def served(tiny_dir):
    backend = TransformersBackend.from_pretrained(tiny_dir, dtype="float64")
    bias = torch.zeros(backend.model.config.vocab_size, dtype=torch.float64)
    bias[backend.renderer.tokenizer.eos_token_id] = 6.0  # short replies that end with a stop token
    handle = backend.model.lm_head.register_forward_hook(
        lambda module, inputs, output: output + bias
    )
    behaviour = Behaviour()
    with ServerThread(make_app(backend, behaviour)) as server:
        yield server, behaviour, backend
    handle.remove()


@pytest.fixture()
def behaviour(served):
    _, state, _ = served
    state.__init__()  # fresh counters and no misbehaviour for each test
    return state


def client(served, **kwargs) -> OpenAIBackend:
    server, _, _ = served
    kwargs.setdefault("backoff_s", 0.01)
    return OpenAIBackend(server.base_url, "tiny", checkpoint_id="tiny-ckpt", **kwargs)


def test_rollout_over_http_keeps_exact_tokens(served, behaviour) -> None:
    _, _, model_backend = served
    backend = client(served, concurrency=3)
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-text-v1", decoding=DECODING, max_turns=3
    )
    trajectories = run_episodes(
        ScriptedShop(), backend, [EpisodeSpec(f"t{i}", i, group_id="g") for i in range(4)], config
    )
    assert all(t.scored and t.exact_tokens for t in trajectories)
    assert all(
        t.provenance.backend == "openai" and t.provenance.checkpoint_id == "tiny-ckpt"
        for t in trajectories
    )
    assert any(len(t.steps) > 1 for t in trajectories)
    for trajectory in trajectories:
        for segment in trajectory.segments:
            with torch.no_grad():
                logits = (
                    model_backend.model(input_ids=torch.tensor([segment.token_ids]))
                    .logits[0]
                    .double()
                )
            logprobs = torch.log_softmax(logits, dim=-1)
            for position, (token, mask) in enumerate(
                zip(segment.token_ids, segment.loss_mask, strict=True)
            ):
                if mask:
                    assert segment.logprobs[position] == pytest.approx(
                        float(logprobs[position - 1, token]), abs=1e-8
                    )
    body = behaviour.bodies[0]
    assert body["temperature"] == 1.0 and body["max_tokens"] == 16 and body["logprobs"] is True
    assert body["seed"] is not None and body["return_token_ids"] is True and "tools" not in body
    assert behaviour.max_in_flight <= 3


def test_tools_are_sent_and_calls_read(served, behaviour) -> None:
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-tools-v1", decoding=DECODING, max_turns=2
    )
    [trajectory] = run_episodes(ScriptedShop(), client(served), [EpisodeSpec("t", 1)], config)
    assert trajectory.scored
    tools = behaviour.bodies[0]["tools"]
    assert [tool["function"]["name"] for tool in tools] == ["search", "click"]
    assert behaviour.bodies[0]["tool_choice"] == "auto"


def test_retries_then_success(served, behaviour) -> None:
    behaviour.fail_first = 2
    backend = client(served, retries=3)
    prompt = [{"role": "user", "content": "hi"}]
    [output] = backend.generate([TurnRequest("k", tuple(prompt), None, 4, 0)], DECODING)
    assert isinstance(output, TurnOutput) and behaviour.calls == 3


def test_failures_become_unscored_episodes(served, behaviour) -> None:
    behaviour.fail_first = 10**6
    config = RolloutConfig(prompt_version="shopsim-compact-en-text-v1", decoding=DECODING)
    [trajectory] = run_episodes(
        ScriptedShop(), client(served, retries=1), [EpisodeSpec("t", 1)], config
    )
    assert not trajectory.scored and "gave up after 2 attempts" in trajectory.error
    assert behaviour.calls == 2


def test_client_errors_are_not_retried(served, behaviour) -> None:
    behaviour.fail_first, behaviour.fail_status = 1, 400
    [output] = client(served, retries=3).generate(
        [TurnRequest("k", ({"role": "user", "content": "x"},), None, 4, 0)], DECODING
    )
    assert isinstance(output, TurnFailure) and "HTTP 400" in output.error and behaviour.calls == 1


def test_timeouts_fail_the_request(served, behaviour) -> None:
    behaviour.delay_s = 1.0
    backend = client(served, retries=0, timeout_s=0.2)
    [output] = backend.generate(
        [TurnRequest("k", ({"role": "user", "content": "x"},), None, 4, 0)], DECODING
    )
    assert isinstance(output, TurnFailure) and "Timeout" in output.error


def test_concurrency_limit(served, behaviour) -> None:
    behaviour.delay_s = 0.2
    requests = [
        TurnRequest(f"k{i}", ({"role": "user", "content": "x"},), None, 2, i) for i in range(5)
    ]
    outputs = client(served, concurrency=2).generate(requests, DECODING)
    assert all(isinstance(output, TurnOutput) for output in outputs)
    assert behaviour.max_in_flight == 2


def test_servers_without_token_ids_give_scored_but_inexact_episodes(served, behaviour) -> None:
    behaviour.drop_token_ids = True
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-text-v1", decoding=DECODING, max_turns=2
    )
    [trajectory] = run_episodes(ScriptedShop(), client(served), [EpisodeSpec("t", 1)], config)
    assert trajectory.scored and not trajectory.exact_tokens and trajectory.segments == []
    assert trajectory.token_counts["generated_tokens"] > 0


def test_parse_completion_reads_tool_calls_and_reasoning() -> None:
    data = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "reasoning_content": "size first",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "click", "arguments": '{"value": "size=M"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    output = parse_completion(data)
    assert output.finish_reason == "stop" and output.reasoning == "size first"
    assert (
        output.tool_calls[0].arguments == {"value": "size=M"}
        and output.tool_calls[0].call_id == "c1"
    )
    assert output.assistant_message["tool_calls"][0]["id"] == "c1"
    assert output.token_ids is None and output.completion_tokens == 5


def test_hosted_mode_sends_only_openai_fields() -> None:
    backend = OpenAIBackend("http://127.0.0.1:9/v1", "m", vllm_extensions=False)
    body = backend.body(TurnRequest("k", (), None, 8, 3), DecodingConfig(seed=None))
    assert set(body) == {"model", "messages", "max_tokens", "temperature", "top_p", "logprobs", "n"}
    backend.close()


def test_make_backend(tiny_dir) -> None:
    from shared.agent.backends import make_backend

    backend = make_backend("transformers", str(tiny_dir), checkpoint_id="step-7")
    assert isinstance(backend, TransformersBackend) and backend.checkpoint_id == "step-7"
    remote = make_backend("openai", "served-name", base_url="http://127.0.0.1:9/v1")
    assert isinstance(remote, OpenAIBackend) and remote.checkpoint_id == "served-name"
    remote.close()
    with pytest.raises(ValueError, match="base_url"):
        make_backend("openai", "m")
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("sglang", str(tiny_dir))
