"""The rollout step on a fake rollout source, the curriculum read from a bank, and the simulated
backend in ShopSim: the behaviours the orchestrator relies on, without services."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.trainer.bank_resolution import curriculum_from_bank
from services.trainer.config import TrainerConfig
from services.trainer.rollout_step import TaskOrder, rollout_step
from services.trainer.rollouts import SimulatedRollouts
from services.trainer.run_context import RunError
from services.trainer.treatments import CurriculumChunk, CurriculumState, InconsistentGroup
from shared.contracts.chunks import ChunkContent, InjectedChunk
from shared.contracts.registry_api.schemas import BankEntryPublic, BankPublic
from shared.runtime.agent.backends.simulated import SimulatedBackend, SimulatedPolicyModel

CONTENT = ChunkContent(
    title="Check options",
    applies_when="a product has options",
    procedure=["set each axis"],
    verify="every axis set",
    avoid="buying early",
)


def curriculum(rhos=(0.9, 0.2)) -> tuple[CurriculumState, list[InjectedChunk]]:
    chunks = tuple(CurriculumChunk(i + 1, f"c{i}", 1, "h" * 64, rho) for i, rho in enumerate(rhos))
    bank = [InjectedChunk(chunk_id=c.slug, version=1, content=CONTENT) for c in chunks]
    return CurriculumState(7, "b" * 64, 0.2, 11, chunks), bank


def simulated(rate=0.0, effect=0.15) -> SimulatedRollouts:
    return SimulatedRollouts(
        SimulatedPolicyModel(seed=3, chunk_effect=effect),
        vocab_size=500,
        prompt_tokens=5,
        generated_tokens=3,
        technical_failure_rate=rate,
        checkpoint_id="ck",
    )


def step(source, tasks=None, **overrides):
    state, bank = curriculum()
    options = dict(
        round_index=0,
        step=1,
        first_group_index=0,
        group_size=4,
        groups_per_wave=8,
        groups_admitted=4,
        spread_epsilon=1e-6,
        max_consecutive_failures=8,
    )
    options.update(overrides)
    tasks = tasks or TaskOrder(tuple(source.train_task_ids()), seed=1)
    return rollout_step(source, state, bank, tasks, **options)


def test_a_step_admits_the_target_and_siblings_share_task_mask_and_state():
    outcome = step(simulated())
    assert outcome.waves == 1 and outcome.episodes_generated == 32
    assert len(outcome.admitted) == 4 and outcome.episodes_admitted == 16
    assert outcome.next_group_index == 8
    for group in outcome.generated:
        assert {t.task_id for t in group.trajectories} == {group.task_id}
        assert {tuple(t.provenance.inclusion) for t in group.trajectories} == {
            group.treatment.inclusion
        }
        assert len({t.episode_id for t in group.trajectories}) == 4


def test_heavy_technical_failures_bring_a_second_wave_and_then_an_abort():
    # half the episodes fail: most groups are technical failures
    outcome = step(simulated(rate=0.5), max_consecutive_failures=1000)
    assert outcome.waves >= 2 and len(outcome.admitted) == 4
    with pytest.raises(RuntimeError, match="technically failed groups in a row"):
        step(simulated(rate=0.95))


class Drifting:
    """A rollout source whose last sibling of each group sees another task: must be refused."""

    name = "drifting"
    checkpoint_id = "ck"

    def __init__(self) -> None:
        self.inner = simulated()

    def train_task_ids(self):
        return self.inner.train_task_ids()

    def run(self, specs):
        trajectories = self.inner.run(specs)
        return [
            t.model_copy(update={"task_id": "other"}) if i % 4 == 3 else t
            for i, t in enumerate(trajectories)
        ]


def test_a_group_whose_siblings_differ_fails_loudly():
    with pytest.raises(InconsistentGroup, match="task_id"):
        step(Drifting())


def test_task_order_is_a_seeded_permutation_per_step():
    tasks = TaskOrder(tuple(f"t{i}" for i in range(10)), seed=5)
    first = [tasks.task(1, g) for g in range(10)]
    assert sorted(first) == sorted(f"t{i}" for i in range(10))  # distinct within a step
    assert [tasks.task(1, g) for g in range(10)] == first  # a resumed step draws the same
    assert [tasks.task(2, g) for g in range(10)] != first


class FailsWithSkills:
    """TEST DOUBLE: the simulated source, except that a group shown a skill block fails
    technically, so a run with a bank needs more waves than one without."""

    name = "fails-with-skills"
    checkpoint_id = "ck"

    def __init__(self) -> None:
        self.inner = simulated()

    def train_task_ids(self):
        return self.inner.train_task_ids()

    def run(self, specs):
        out = []
        for spec, t in zip(specs, self.inner.run(specs), strict=True):
            failed = t.model_copy(update={"scored": False, "error": "double"})
            out.append(failed if spec.chunks else t)
        return out


def crn_run(state, bank, source, steps=3):
    """The first `steps` rollout steps of one run; per step, per group index: its coordinates."""
    tasks, first, seen = TaskOrder(tuple(source.train_task_ids()), seed=state.seed), 0, []
    for number in range(1, steps + 1):
        outcome = rollout_step(
            source, state, bank, tasks, round_index=0, step=number, first_group_index=first,
            group_size=4, groups_per_wave=4, groups_admitted=3, spread_epsilon=1e-6,
            max_consecutive_failures=1000,
        )  # fmt: skip
        seen.append(
            {
                group.index - first: (
                    group.task_id,
                    group.trajectories[0].provenance.seed,
                    tuple(t.episode_id for t in group.trajectories),
                    group.treatment.mode == "skill_free",
                )
                for group in outcome.generated
            }
        )
        first = outcome.next_group_index
    return seen


def test_arms_with_one_seed_draw_the_same_tasks_and_seeds_whatever_their_bank():
    """Common random numbers: grpo (the empty bank) and intraskill (S_0) with one seed give
    every group of every step the same task, environment seed, sampling ids (episode ids) and
    skill-free draw, although the bank makes intraskill's steps take more waves."""
    s0, s0_bank = curriculum()
    empty = CurriculumState(99, "e" * 64, s0.q, s0.seed, ())
    source = FailsWithSkills()
    grpo, intraskill = crn_run(empty, [], source), crn_run(s0, s0_bank, source)
    assert sum(len(s) for s in intraskill) > sum(len(s) for s in grpo)  # the waves drift
    for plain, skilled in zip(grpo, intraskill, strict=True):
        assert plain and all(skilled[g] == plain[g] for g in plain)


def bank(rhos, coefficients, *, q=0.2, frozen=True) -> BankPublic:
    now = datetime.now(UTC)
    entries = [
        BankEntryPublic(
            position=i,
            chunk_id=i + 1,
            slug=f"c{i}",
            version=1,
            chunk_version_id=10 + i,
            rho=rho,
            coefficient=coefficient,
            content_hash="a" * 64,
            content=CONTENT,
        )
        for i, (rho, coefficient) in enumerate(zip(rhos, coefficients, strict=True))
    ]
    return BankPublic(
        id=4,
        q=q,
        round=1,
        parent_bank_id=None,
        gate_decision_id=None,
        note=None,
        content_hash="f" * 64 if frozen else None,
        frozen_at=now if frozen else None,
        created_by="t",
        created_at=now,
        entries=entries,
    )


def test_the_curriculum_takes_rho_from_the_gate_coefficients_and_refuses_bad_banks():
    config = TrainerConfig()
    state, injected = curriculum_from_bank(bank([0.9, 0.55], [0.1, 0.05]), config)
    assert state.rhos == (0.9, 0.55) and [c.chunk_id for c in injected] == ["c0", "c1"]
    with pytest.raises(RunError, match="its coefficient gives"):
        curriculum_from_bank(bank([0.9, 0.3], [0.1, 0.05]), config)
    with pytest.raises(RunError, match="not frozen"):
        curriculum_from_bank(bank([0.9], [0.1], frozen=False), config)
    with pytest.raises(RunError, match=r"q=0\.5"):
        curriculum_from_bank(bank([0.9], [0.1], q=0.5), config)


def test_the_simulated_backend_succeeds_in_shopsim_as_often_as_its_model_says():
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
    from shared.runtime.shopsim.env import ShopEnv

    env = ShopEnv.from_preset("test")
    model = SimulatedPolicyModel(seed=2, base_success=(1.0, 1.0))
    backend = SimulatedBackend(model, env, model_id="sim", checkpoint_id="ck")
    tasks = env.task_ids("val")
    done = RolloutEngine(env, backend, RolloutConfig()).run(
        [EpisodeSpec(task_id=t, seed=0) for t in tasks]
    )
    # probability 1: every episode plays the oracle and buys (the oracle's own success rate)
    assert all(t.scored and t.termination == "purchase" for t in done)
    never = SimulatedBackend(
        SimulatedPolicyModel(seed=2, base_success=(0.0, 0.0)),
        env,
        model_id="sim",
        checkpoint_id="ck",
    )
    done = RolloutEngine(env, never, RolloutConfig()).run(
        [EpisodeSpec(task_id=t, seed=0) for t in tasks]
    )
    assert all(t.termination == "generation_length" and t.reward == 0.0 for t in done)
