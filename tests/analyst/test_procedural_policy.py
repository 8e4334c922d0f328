"""The `procedural` policy, a TEST DOUBLE: it follows exactly the chunks it recognises."""

import pytest

from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.backends.base import TurnRequest
from shared.runtime.agent.backends.procedural import (
    MECHANISMS,
    ProceduralPolicy,
    explicit_needs,
    persona_needs,
    recognised_mechanisms,
)
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.runtime.shopsim.env import ShopEnv

TITLES = {
    "explicit_query": "Search query: put every explicit constraint in one query",
    "persona_constraints": "Persona document: apply the profile's constraints",
    "inspect_candidates": "Candidate inspection: check every required attribute",
    "option_choice": "Option values: pick the variant the request names",
    "complete_options": "Before buying: set every option axis",
    "price_check": "Price check: the selected price against the budget",
}


def chunk(key: str, title: str | None = None) -> InjectedChunk:
    content = ChunkContent(
        title=title or TITLES[key], applies_when="a", procedure=["b"], verify="c", avoid="d"
    )
    return InjectedChunk(chunk_id=key, version=1, content=content)


@pytest.fixture(scope="module")
def env():
    return ShopEnv.from_preset("test")


def success_rate(env, chunks, *, seed=0, slip=0.0):
    policy = make_backend("procedural", "test-double", slip=slip)
    specs = [
        EpisodeSpec(task_id=task, seed=seed + i, chunks=tuple(chunks))
        for i, task in enumerate(env.task_ids("val"))
    ]
    trajectories = run_episodes(env, policy, specs, RolloutConfig(concurrency=20))
    assert all(t.scored for t in trajectories)
    return sum(t.components["r_success"] for t in trajectories) / len(trajectories), trajectories


def test_recognises_mechanisms_by_chunk_title_only():
    block = render_skill_block([chunk(k) for k in ("explicit_query", "price_check")])
    assert recognised_mechanisms(block) == {"explicit_query", "price_check"}
    # The reference's Chinese query chunk is recognised; text outside titles is not read.
    zh = chunk("x", "搜索查询构建 - 显式约束整合")
    assert recognised_mechanisms(render_skill_block([zh])) == {"explicit_query"}
    body_only = InjectedChunk(
        chunk_id="y",
        version=1,
        content=ChunkContent(
            title="General advice",
            applies_when="persona",
            procedure=["price budget"],
            verify="query constraint",
            avoid="every option axis",
        ),
    )
    assert recognised_mechanisms(render_skill_block([body_only])) == frozenset()


def test_reads_the_instruction_and_the_profile():
    needs = explicit_needs(
        "I need a vacuum with hepa filter and robot. I'd like color white. My budget is "
        "around $200."
    )
    assert (needs.noun, needs.attributes, needs.options) == (
        "vacuum",
        ["hepa filter", "robot"],
        ["color white"],
    )
    assert needs.budget == pytest.approx(220.0)  # "around" allows 10% (the reward's rule)
    profile = (
        "shopping_notes: Whenever I get a vacuum, it must come with pet hair and crevice tool., "
        "When buying a vacuum, choose color black for me., I never spend more than $600 on a "
        "vacuum., For jeans, I only buy ones with stretch."
    )
    persona = persona_needs(profile, "vacuum")
    assert persona.attributes == ["pet hair", "crevice tool"]
    assert persona.options == ["color black"]
    assert persona.budget == 600.0


def test_without_chunks_it_searches_the_noun_alone(env):
    policy = ProceduralPolicy(slip=0.0)
    task = env.task_view(env.task_ids("val")[0])
    _, first = env.reset(task.task_id)
    messages = (
        {"role": "system", "content": "You shop.\n\nUser profile:\nname: x"},
        {"role": "user", "content": f"Task:\n{task.instruction}\n\n{first.observation}"},
    )
    request = TurnRequest(key="e", messages=messages, tools=None, max_new_tokens=8, seed=1)
    noun = explicit_needs(task.instruction).noun
    assert policy.act(request) == f"search[{noun}]"


def test_each_mechanism_matters_and_all_together_succeed(env):
    bare, _ = success_rate(env, [])
    full, _ = success_rate(env, [chunk(k) for k in MECHANISMS])
    # The planted effect: the naive shopper almost never succeeds, the full procedure mostly.
    assert bare <= 0.1
    assert full >= 0.6
    for left_out in ("option_choice", "complete_options"):
        partial, _ = success_rate(env, [chunk(k) for k in MECHANISMS if k != left_out])
        assert partial < full, left_out


def test_same_seed_same_episodes_and_slips_depend_on_it(env):
    chunks = [chunk(k) for k in MECHANISMS]
    _, first = success_rate(env, chunks, seed=3, slip=0.5)
    _, again = success_rate(env, chunks, seed=3, slip=0.5)
    _, other = success_rate(env, chunks, seed=4, slip=0.5)
    actions = [[s.action for s in t.steps] for t in first]
    assert actions == [[s.action for s in t.steps] for t in again]
    assert actions != [[s.action for s in t.steps] for t in other]


def test_tools_protocol_replies_are_parsed_calls(env):
    policy = make_backend("procedural", "test-double")
    specs = [EpisodeSpec(task_id=env.task_ids("val")[0], seed=0)]
    config = RolloutConfig(prompt_version="shopsim-compact-en-tools-v1")
    (trajectory,) = run_episodes(env, policy, specs, config)
    assert trajectory.scored and trajectory.protocol_errors == 0
    assert trajectory.provenance.backend == "procedural"
    assert "test-double" in trajectory.provenance.model_id


def test_competence_switches_mechanisms_on_without_a_skill_block(env):
    policy = make_backend("procedural", "test-double", slip=0.0, competence=1.0)
    specs = [EpisodeSpec(task_id=t, seed=i) for i, t in enumerate(env.task_ids("val"))]
    innate = run_episodes(env, policy, specs, RolloutConfig(concurrency=20))
    full, _ = success_rate(env, [chunk(k) for k in MECHANISMS])
    assert sum(t.components["r_success"] for t in innate) / len(innate) == full
    with pytest.raises(ValueError):
        ProceduralPolicy(competence=1.5)
