"""The episode loop: endings, protocol errors, exact-token segments, failures, provenance, JSONL."""

from __future__ import annotations

import json

import pytest

from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.runtime.agent.advantage import training_samples
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine, run_episodes
from shared.runtime.agent.trajectory import read_jsonl, write_jsonl
from tests.agent.doubles import PlainEpisode, ScriptedBackend, ScriptedShop

TEXT = RolloutConfig(
    prompt_version="shopsim-compact-en-text-v1", decoding=DecodingConfig(max_new_tokens=64, seed=3)
)
TOOLS = RolloutConfig(
    prompt_version="shopsim-compact-en-tools-v1", decoding=DecodingConfig(max_new_tokens=64, seed=3)
)

BUY = ["search[red shoes]", "click[B001]", "click[size=M]", "click[buy now]"]


def tool(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


BUY_TOOLS = [
    tool("search", query="red shoes"),
    tool("click", value="B001"),
    tool("click", value="size=M"),
    tool("click", value="buy now"),
]


def script_of(replies):
    def script(request, turn):
        return replies[turn] if turn < len(replies) else "nothing"

    return script


def bank():
    def make(chunk_id: str) -> InjectedChunk:
        content = ChunkContent(
            title=chunk_id, applies_when="always", procedure=["do it"], verify="v", avoid="a"
        )
        return InjectedChunk(chunk_id=chunk_id, version=2, content=content)

    return [make("alpha"), make("beta")]


def test_purchase_episode_with_exact_single_segment(renderer) -> None:
    backend = ScriptedBackend(renderer, script_of(BUY))
    spec = EpisodeSpec.masked(
        "train-1", 11, bank(), [0, 1], bank_id="bank-7", bank_hash="abc", group_id="g"
    )
    env = ScriptedShop()
    [trajectory] = run_episodes(env, backend, [spec], TEXT)
    assert trajectory.scored and trajectory.termination == "purchase"
    assert trajectory.reward == 1.0 and trajectory.components["r_success"] == 1.0
    assert [step.action for step in trajectory.steps] == BUY
    assert env.episodes[0].actions == BUY
    # Text protocol, stable template: the whole episode is one token-contiguous segment.
    assert trajectory.exact_tokens and len(trajectory.segments) == 1
    segment = trajectory.segments[0]
    assert segment.turns == [0, 1, 2, 3]
    assert len(segment.token_ids) == len(segment.loss_mask) == len(segment.logprobs)
    generated = [
        token for token, mask in zip(segment.token_ids, segment.loss_mask, strict=True) if mask
    ]
    assert sum(segment.loss_mask) == trajectory.token_counts["generated_tokens"] == len(generated)
    expected = []
    for reply in BUY:
        expected += [*renderer.encode(reply), renderer.tokenizer.eos_token_id]
    assert generated == expected
    assert all(
        lp == 0.0 for lp, mask in zip(segment.logprobs, segment.loss_mask, strict=True) if not mask
    )
    # The last turn's prompt is exactly the segment up to that turn's generation.
    last = backend.calls[-1][0]
    assert list(last.prompt_ids) == segment.token_ids[: len(last.prompt_ids)]
    provenance = trajectory.provenance
    assert provenance.bank_id == "bank-7" and provenance.bank_hash == "abc"
    assert provenance.inclusion == [0, 1] and provenance.injected == ["beta@2"]
    assert provenance.prompt_version == "shopsim-compact-en-text-v1"
    assert provenance.action_protocol == "text-actions-v1"
    assert provenance.env_version == ScriptedShop.version
    assert provenance.decoding["temperature"] == 0.6 and provenance.seed == 11
    assert provenance.model_id == "scripted-model" and provenance.checkpoint_id == "scripted-ckpt"
    assert provenance.skill_block_hash is not None
    system = backend.calls[0][0].messages[0]["content"]
    assert '<skill id="beta" version="2">' in system and "alpha" not in system
    assert backend.released == [trajectory.episode_id]


def test_wrong_choices_score_their_components(renderer) -> None:
    replies = ["search[shoes]", "click[B002 [refurb]]", "click[size=S]", "click[buy now]"]
    [trajectory] = run_episodes(
        ScriptedShop(), ScriptedBackend(renderer, script_of(replies)), [EpisodeSpec("t", 1)], TEXT
    )
    assert trajectory.scored and trajectory.termination == "purchase" and trajectory.reward == 0.0
    assert trajectory.components["r_type"] == 1.0 and trajectory.components["r_att"] == 0.0


def test_protocol_error_consumes_a_step_without_an_action(renderer) -> None:
    replies = ["I think I should search.", "search[a] search[b]", *BUY]
    env = ScriptedShop()
    backend = ScriptedBackend(renderer, script_of(replies))
    [trajectory] = run_episodes(env, backend, [EpisodeSpec("t", 1)], TEXT)
    codes = [
        step.protocol_error["code"] if step.protocol_error else None for step in trajectory.steps
    ]
    assert codes == ["tool_call_count", "tool_call_count", None, None, None, None]
    assert trajectory.protocol_errors == 2 and trajectory.termination == "purchase"
    assert env.episodes[0].actions == BUY  # the environment never saw the bad turns
    feedback = json.loads(backend.calls[1][0].messages[-1]["content"])
    assert feedback["type"] == "tool_protocol_error" and feedback["code"] == "tool_call_count"


@pytest.mark.parametrize("terminates", [True, False])
def test_action_limit(renderer, terminates: bool) -> None:
    config = RolloutConfig(prompt_version=TEXT.prompt_version, decoding=TEXT.decoding, max_turns=3)
    env = ScriptedShop()
    if not terminates:
        env.episode_class = PlainEpisode
    [trajectory] = run_episodes(
        env,
        ScriptedBackend(renderer, script_of(["hm"] * 10)),
        [EpisodeSpec("t", 1)],
        config,
    )
    assert trajectory.scored and trajectory.termination == "action_limit"
    assert trajectory.reward == 0.0 and len(trajectory.steps) == 3
    assert trajectory.components == dict.fromkeys(trajectory.components, 0.0)
    assert env.episodes[0].terminated == ("action_limit" if terminates else None)
    # The environment's own cap applies when no runtime cap is set.
    [capped] = run_episodes(
        ScriptedShop(max_steps=2),
        ScriptedBackend(renderer, script_of(["hm"] * 10)),
        [EpisodeSpec("t", 1)],
        TEXT,
    )
    assert capped.termination == "action_limit" and len(capped.steps) == 2


def test_generation_length(renderer) -> None:
    # No valid action at the token limit: the episode ends, scores 0, and is still trained on.
    env = ScriptedShop()
    [cut] = run_episodes(
        env,
        ScriptedBackend(renderer, script_of([("search[red", "length")])),
        [EpisodeSpec("t", 1)],
        TEXT,
    )
    assert cut.scored and cut.termination == "generation_length" and cut.reward == 0.0
    assert env.episodes[0].terminated == "generation_length" and env.episodes[0].actions == []
    assert cut.exact_tokens and sum(cut.segments[0].loss_mask) > 0
    # A valid action at the limit still counts.
    replies = [("search[red shoes]", "length"), *BUY[1:]]
    [ok] = run_episodes(
        ScriptedShop(), ScriptedBackend(renderer, script_of(replies)), [EpisodeSpec("t", 1)], TEXT
    )
    assert ok.termination == "purchase" and ok.steps[0].finish_reason == "length"


def test_context_cap_ends_as_generation_length(renderer) -> None:
    config = RolloutConfig(
        prompt_version=TEXT.prompt_version,
        decoding=DecodingConfig(max_new_tokens=8, context_cap=60),
    )
    backend = ScriptedBackend(renderer, script_of(BUY))
    [trajectory] = run_episodes(ScriptedShop(), backend, [EpisodeSpec("t", 1)], config)
    assert trajectory.termination == "generation_length" and trajectory.steps == []
    assert backend.calls == []


def test_technical_failures_are_unscored_and_isolated(renderer) -> None:
    specs = [
        EpisodeSpec("ok", 1),
        EpisodeSpec("backend-fails", 2),
        EpisodeSpec("reset-fails", 3),
        EpisodeSpec("step-fails", 4),
    ]
    failing_id = specs[1].resolved_id()
    env = ScriptedShop(fail_reset="reset-fails")

    def script(request, turn):
        if request.key == specs[3].resolved_id() and turn == 1:
            return "click[B002 [refurb]]"  # the scripted env raises on this action
        return BUY[turn]

    env.fail_step = "B002"
    trajectories = run_episodes(
        env, ScriptedBackend(renderer, script, fail_keys=[failing_id]), specs, TEXT
    )
    assert [t.task_id for t in trajectories] == ["ok", "backend-fails", "reset-fails", "step-fails"]
    assert [t.scored for t in trajectories] == [True, False, False, False]
    assert trajectories[0].reward == 1.0
    assert "scripted backend failure" in trajectories[1].error
    assert "reset failed" in trajectories[2].error
    assert "step failed" in trajectories[3].error
    assert all(t.termination is None and t.reward == 0.0 for t in trajectories[1:])


def test_backend_that_raises_fails_only_that_round(renderer) -> None:
    class Exploding(ScriptedBackend):
        def generate(self, requests, decoding):
            raise RuntimeError("boom")

    trajectories = run_episodes(
        ScriptedShop(),
        Exploding(renderer, script_of(BUY)),
        [EpisodeSpec("a", 1), EpisodeSpec("b", 2)],
        TEXT,
    )
    assert all(not t.scored and "boom" in t.error for t in trajectories)


def test_concurrency_and_order(renderer) -> None:
    backend = ScriptedBackend(renderer, script_of(BUY))
    specs = [EpisodeSpec(f"t{i}", i) for i in range(5)]
    config = RolloutConfig(
        prompt_version=TEXT.prompt_version, decoding=TEXT.decoding, concurrency=2
    )
    engine = RolloutEngine(ScriptedShop(), backend, config)
    streamed = []
    trajectories = engine.run(specs, on_trajectory=streamed.append)
    assert [t.task_id for t in trajectories] == [f"t{i}" for i in range(5)]
    assert sorted(t.task_id for t in streamed) == sorted(t.task_id for t in trajectories)
    assert max(len(call) for call in backend.calls) == 2
    assert engine.stats.episodes == 5 and engine.stats.turns == 20
    with pytest.raises(ValueError, match="unique"):
        engine.run([EpisodeSpec("t", 1), EpisodeSpec("t", 1)])


def test_changing_tool_schemas_fork_segments_and_advantage_counts_once(renderer) -> None:
    # The click enum lives in the system turn, so each new page re-renders the prompt's start:
    # every such turn forks a new token-contiguous segment of the same episode.
    good = ScriptedBackend(renderer, script_of(BUY_TOOLS))
    bad_replies = [BUY_TOOLS[0], BUY_TOOLS[1], tool("click", value="size=S"), BUY_TOOLS[3]]
    bad = ScriptedBackend(renderer, script_of(bad_replies))
    [won] = run_episodes(ScriptedShop(), good, [EpisodeSpec("t", 1, group_id="g1")], TOOLS)
    [lost] = run_episodes(ScriptedShop(), bad, [EpisodeSpec("t", 2, group_id="g1")], TOOLS)
    assert won.termination == "purchase" and won.reward == 1.0 and lost.reward == 0.0
    # search page | results page | item page, twice with the same enum (so those two continue).
    assert [segment.turns for segment in won.segments] == [[0], [1], [2, 3]]
    for segment in won.segments:
        assert segment.token_ids[0] == renderer.tokenizer.convert_tokens_to_ids("<|im_start|>")
        assert sum(segment.loss_mask) > 0
    samples = training_samples([won, lost])
    assert {sample.episode_id for sample in samples} == {won.episode_id, lost.episode_id}
    advantages = {sample.episode_id: sample.advantage for sample in samples}
    # Two episodes, rewards 1 and 0: +-0.707 whatever the number of segments each has.
    assert advantages[won.episode_id] == pytest.approx(0.7071, abs=1e-3)
    assert advantages[lost.episode_id] == pytest.approx(-0.7071, abs=1e-3)
    assert len(samples) == len(won.segments) + len(lost.segments)


def test_jsonl_round_trip(renderer, tmp_path) -> None:
    trajectories = run_episodes(
        ScriptedShop(),
        ScriptedBackend(renderer, script_of(BUY)),
        [EpisodeSpec("a", 1), EpisodeSpec("b", 2)],
        TEXT,
    )
    path = tmp_path / "episodes.jsonl"
    assert write_jsonl(path, trajectories) == 2
    back = list(read_jsonl(path))
    assert back == trajectories
    record = json.loads(path.read_text().splitlines()[0])
    assert record["schema_version"] == "intraskill-episode-v1"
    assert {"provenance", "steps", "components", "termination", "token_counts", "timings"} <= set(
        record
    )
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(ValueError, match=":3:"):
        list(read_jsonl(path))


def test_tools_layout_needs_a_tool_template(renderer) -> None:
    backend = ScriptedBackend(renderer, script_of(BUY))
    backend.renderer.supports_tools = False
    try:
        with pytest.raises(ValueError, match="renders no tools"):
            RolloutEngine(ScriptedShop(), backend, TOOLS)
    finally:
        backend.renderer.supports_tools = True


class StreamingScripted(ScriptedBackend):
    """A scripted backend with the continuous-batching interface; may raise after some turns."""

    def __init__(self, *args, raise_after: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.raise_after = raise_after
        self.in_flight_max = 0

    def stream(self, requests, decoding, follow_up) -> None:
        queue = list(requests)
        answered = 0
        while queue:
            self.in_flight_max = max(self.in_flight_max, len(queue))
            request = queue.pop(0)
            if self.raise_after is not None and answered >= self.raise_after:
                raise RuntimeError("engine died")
            [output] = self.generate([request], decoding)
            answered += 1
            following = follow_up(request, output)
            if following is not None:
                queue.append(following)


def test_streaming_backends_refill_and_keep_the_concurrency(renderer) -> None:
    backend = StreamingScripted(renderer, script_of(BUY))
    config = RolloutConfig(
        prompt_version=TEXT.prompt_version, decoding=TEXT.decoding, concurrency=2
    )
    engine = RolloutEngine(ScriptedShop(), backend, config)
    trajectories = engine.run([EpisodeSpec(f"t{i}", i) for i in range(5)])
    assert [t.termination for t in trajectories] == ["purchase"] * 5
    assert backend.in_flight_max == 2 and engine.stats.turns == 20
    assert sorted(backend.released) == sorted(t.episode_id for t in trajectories)


def test_streaming_backend_that_raises_fails_live_episodes_only(renderer) -> None:
    backend = StreamingScripted(renderer, script_of(BUY), raise_after=5)
    config = RolloutConfig(
        prompt_version=TEXT.prompt_version, decoding=TEXT.decoding, concurrency=2
    )
    trajectories = RolloutEngine(ScriptedShop(), backend, config).run(
        [EpisodeSpec(f"t{i}", i) for i in range(4)]
    )
    assert [t.scored for t in trajectories] == [False, False, False, False]
    backend = StreamingScripted(renderer, script_of(BUY), raise_after=9)
    trajectories = RolloutEngine(ScriptedShop(), backend, config).run(
        [EpisodeSpec(f"t{i}", i) for i in range(4)]
    )
    # 9 turns: both first episodes bought (8 turns), then the engine died with two live.
    assert [t.scored for t in trajectories] == [True, True, False, False]
    assert "engine died" in trajectories[2].error
