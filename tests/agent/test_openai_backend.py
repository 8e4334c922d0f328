"""The OpenAI-compatible backend against a real local HTTP server wrapping the tiny model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest  # noqa: E402
from shared.runtime.agent.backends.openai_backend import (  # noqa: E402
    OpenAIBackend,
    ServerCheckError,
    logprob_mode,
    parse_completion,
)
from shared.runtime.agent.backends.transformers_backend import TransformersBackend  # noqa: E402
from shared.runtime.agent.decoding import DecodingConfig  # noqa: E402
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine, run_episodes  # noqa: E402
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
    kwargs.setdefault("checkpoint_id", "tiny-ckpt")
    return OpenAIBackend(server.base_url, "tiny", **kwargs)


def episode_bodies(behaviour) -> list[dict]:
    """The episodes' requests, less the start-up probes (which ask for one token, no `n`)."""
    return [body for body in behaviour.bodies if "n" in body]


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
    body = episode_bodies(behaviour)[0]
    assert body["temperature"] == 1.0 and body["max_tokens"] == 16 and body["logprobs"] is True
    assert body["seed"] is not None and body["return_token_ids"] is True and "tools" not in body
    assert behaviour.max_in_flight <= 3


def test_tools_are_sent_and_calls_read(served, behaviour) -> None:
    config = RolloutConfig(
        prompt_version="shopsim-compact-en-tools-v1", decoding=DECODING, max_turns=2
    )
    [trajectory] = run_episodes(ScriptedShop(), client(served), [EpisodeSpec("t", 1)], config)
    assert trajectory.scored
    body = episode_bodies(behaviour)[0]
    assert [tool["function"]["name"] for tool in body["tools"]] == ["search", "click"]
    assert body["tool_choice"] == "auto"


def test_retries_then_success(served, behaviour) -> None:
    behaviour.fail_first = 2
    backend = client(served, retries=3)
    prompt = [{"role": "user", "content": "hi"}]
    [output] = backend.generate([TurnRequest("k", tuple(prompt), None, 4, 0)], DECODING)
    assert isinstance(output, TurnOutput) and behaviour.calls == 3


def test_failures_become_unscored_episodes(served, behaviour) -> None:
    config = RolloutConfig(prompt_version="shopsim-compact-en-text-v1", decoding=DECODING)
    engine = RolloutEngine(ScriptedShop(), client(served, retries=1), config)
    behaviour.__init__()
    behaviour.fail_first = 10**6  # the server breaks after the start-up checks passed
    [trajectory] = engine.run([EpisodeSpec("t", 1)])
    assert not trajectory.scored and "gave up after 2 attempts" in trajectory.error
    assert behaviour.calls == 2


def test_an_unreachable_server_fails_the_run_at_start(served, behaviour) -> None:
    behaviour.fail_first = 10**6
    config = RolloutConfig(prompt_version="shopsim-compact-en-text-v1", decoding=DECODING)
    with pytest.raises(ServerCheckError, match="HTTP 503"):
        RolloutEngine(ScriptedShop(), client(served, retries=1), config)


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
    from shared.runtime.agent.backends import make_backend

    backend = make_backend("transformers", str(tiny_dir), checkpoint_id="step-7")
    assert isinstance(backend, TransformersBackend) and backend.checkpoint_id == "step-7"
    remote = make_backend("openai", "served-name", base_url="http://127.0.0.1:9/v1")
    # Never the served name: unknown until the server publishes it or the caller passes it.
    assert isinstance(remote, OpenAIBackend) and remote.checkpoint_id is None
    remote.close()
    with pytest.raises(ValueError, match="base_url"):
        make_backend("openai", "m")
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("sglang", str(tiny_dir))


TEXT = "shopsim-compact-en-text-v1"
TOOLS = "shopsim-compact-en-tools-v1"
TEMPERED = DecodingConfig(temperature=0.6, max_new_tokens=16, seed=1)


def recompute(model_backend, segment, temperature: float) -> list[tuple[float, float]]:
    """(recorded, log_softmax(logits / T)) for every generated token of a segment."""
    with torch.no_grad():
        logits = model_backend.model(input_ids=torch.tensor([segment.token_ids])).logits[0]
    table = torch.log_softmax(logits.double() / temperature, dim=-1)
    return [
        (segment.logprobs[i], float(table[i - 1, token]))
        for i, (token, mask) in enumerate(zip(segment.token_ids, segment.loss_mask, strict=True))
        if mask
    ]


def test_logprob_mode_tells_tempered_from_untempered() -> None:
    # Log-prob gaps between tokens are logit gaps / T: at T = 0.5 they double.
    at_one = {"a": -0.1, "b": -1.1, "c": -2.6}
    assert logprob_mode(at_one, {"a": -0.01, "b": -2.01, "c": -5.01}, 0.5) == "processed"
    assert logprob_mode(at_one, at_one, 0.5) == "untempered"
    assert logprob_mode(at_one, {"a": -0.01, "b": -3.0, "c": -4.0}, 0.5) == "unverifiable"
    assert logprob_mode({"a": -1.0, "b": -1.01}, {"a": -1.0, "b": -1.02}, 0.5) == "unverifiable"
    # vLLM lists the sampled token first, in or out of the top k: tokens align, not ranks.
    sampled_first = {"z": -9.0, "a": -0.01, "b": -2.01}
    assert logprob_mode(at_one, sampled_first, 0.5) == "processed"


def test_tempered_logprobs_are_verified_and_exact(served, behaviour) -> None:
    _, _, model_backend = served
    config = RolloutConfig(prompt_version=TEXT, decoding=TEMPERED, max_turns=2)
    trajectories = run_episodes(
        ScriptedShop(), client(served), [EpisodeSpec(f"t{i}", i) for i in range(2)], config
    )
    assert all(t.scored and t.exact_tokens for t in trajectories)
    for trajectory in trajectories:
        for recorded, expected in recompute(model_backend, trajectory.segments[0], 0.6):
            assert recorded == pytest.approx(expected, abs=1e-8)


def test_untempered_logprobs_refuse_the_run_once(served, behaviour) -> None:
    behaviour.logprobs_mode = "raw_logprobs"
    config = RolloutConfig(prompt_version=TEXT, decoding=TEMPERED)
    with pytest.raises(ServerCheckError, match="--logprobs-mode processed_logprobs"):
        RolloutEngine(ScriptedShop(), client(served), config)
    assert behaviour.calls <= 2  # the probe, not an episode


def test_untempered_logprobs_can_be_marked_inexact(served, behaviour) -> None:
    behaviour.logprobs_mode = "raw_logprobs"
    config = RolloutConfig(prompt_version=TEXT, decoding=TEMPERED, max_turns=2)
    backend = client(served, untempered_logprobs="mark")
    [trajectory] = run_episodes(ScriptedShop(), backend, [EpisodeSpec("t", 1)], config)
    assert trajectory.scored and not trajectory.exact_tokens and trajectory.segments == []


def test_at_temperature_one_any_mode_is_exact(served, behaviour) -> None:
    behaviour.logprobs_mode = "raw_logprobs"  # raw = processed when T = 1
    config = RolloutConfig(prompt_version=TEXT, decoding=DECODING, max_turns=1)
    [trajectory] = run_episodes(ScriptedShop(), client(served), [EpisodeSpec("t", 1)], config)
    assert trajectory.exact_tokens


def test_a_server_without_tool_choice_fails_once_at_start(served, behaviour) -> None:
    behaviour.tool_choice_enabled = False
    config = RolloutConfig(prompt_version=TOOLS, decoding=DECODING)
    with pytest.raises(ServerCheckError, match="--enable-auto-tool-choice"):
        RolloutEngine(ScriptedShop(), client(served), config)
    assert behaviour.calls == 1


def test_a_template_without_tools_is_refused_for_tool_layouts(served, behaviour) -> None:
    behaviour.template_drops_tools = True
    config = RolloutConfig(prompt_version=TOOLS, decoding=DECODING)
    with pytest.raises(ServerCheckError, match="renders no tools"):
        RolloutEngine(ScriptedShop(), client(served), config)
    RolloutEngine(ScriptedShop(), client(served), RolloutConfig(prompt_version=TEXT))  # text: fine


def test_context_cap_holds_on_the_server_path(served, behaviour) -> None:
    backend = client(served)
    first = RolloutEngine(ScriptedShop(), backend, RolloutConfig(prompt_version=TEXT))
    first_prompt = first.run([EpisodeSpec("t", 0)])[0].segments[0].loss_mask.index(1)
    cap = first_prompt + 20  # room for the first turn only: later turns must be cut short
    decoding = DECODING.with_(context_cap=cap, max_new_tokens=16)
    config = RolloutConfig(prompt_version=TEXT, decoding=decoding, max_turns=6)
    trajectories = run_episodes(
        ScriptedShop(), backend, [EpisodeSpec(f"t{i}", i) for i in range(3)], config
    )
    assert all(t.scored for t in trajectories)
    assert all(len(s.token_ids) <= cap for t in trajectories for s in t.segments)
    assert any(t.termination == "generation_length" for t in trajectories)


def test_prompt_count_matches_the_served_prompt(served, behaviour) -> None:
    backend = client(served)
    messages = [{"role": "system", "content": "shop"}, {"role": "user", "content": "buy a hat"}]
    [output] = backend.generate([TurnRequest("k", tuple(messages), None, 4, 0)], DECODING)
    assert backend.count_prompt(messages, None, DECODING) == len(output.prompt_ids)


def test_checkpoint_id_is_the_published_identity_or_refused(served, behaviour) -> None:
    server, _, _ = served
    config = RolloutConfig(prompt_version=TEXT, decoding=DECODING, max_turns=1)
    unnamed = OpenAIBackend(server.base_url, "tiny", backoff_s=0.01)
    with pytest.raises(ServerCheckError, match="pass checkpoint_id"):
        RolloutEngine(ScriptedShop(), unnamed, config)
    behaviour.served_names = ["tiny", "checkpoint:tiny-seed0-abc"]
    published = OpenAIBackend(server.base_url, "tiny", backoff_s=0.01)
    [trajectory] = run_episodes(ScriptedShop(), published, [EpisodeSpec("t", 1)], config)
    assert trajectory.provenance.checkpoint_id == "tiny-seed0-abc"
    with pytest.raises(ServerCheckError, match="not 'tiny-seed1-def'"):  # the wrong weights
        RolloutEngine(ScriptedShop(), client(served, checkpoint_id="tiny-seed1-def"), config)
    with pytest.raises(ServerCheckError, match="not 'other'"):
        RolloutEngine(ScriptedShop(), OpenAIBackend(server.base_url, "other"), config)


def test_a_server_that_hides_cached_tokens_is_noticed(served, behaviour) -> None:
    behaviour.prompt_tokens_details = False
    backend = client(served)
    RolloutEngine(ScriptedShop(), backend, RolloutConfig(prompt_version=TEXT, decoding=TEMPERED))
    assert backend.reports_cached_tokens is False
