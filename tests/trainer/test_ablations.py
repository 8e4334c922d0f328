"""The ablation switches and the validation design, as pure functions (no trainer, no network).

Expected values come from the issue: no-mask means q = 0 and every rho = 1; rotate means each
round's gate tasks are fresh and disjoint from every other round's; confirmation tasks are used
by no gate; no-gate admits every candidate, a rewrite in its target's place."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.trainer.ablations import admitted_entries, unmasked
from services.trainer.config import ConfigError, GateConfig, TrainerConfig
from services.trainer.treatments import CurriculumChunk, CurriculumState, sample_treatment
from services.trainer.validation_tasks import confirmation_task_ids, gate_a_task_ids, gate_task_ids

VAL = [f"val-{i:04d}" for i in range(100)]


def config(**gate) -> TrainerConfig:
    return TrainerConfig(rounds=3, gate=GateConfig(**({"val_tasks": 10} | gate)))


def test_rotated_gates_draw_disjoint_subsets_of_the_pool_and_confirmation_is_held_out():
    rotate = config(val_policy="rotate", val_pool=40, confirm_tasks=15)
    rounds = [gate_task_ids(rotate, VAL, r) for r in range(3)]
    assert [len(r) for r in rounds] == [10, 10, 10]
    used = [t for r in rounds for t in r]
    assert len(set(used)) == 30 and set(used) <= set(VAL[10:50])  # the pool after Gate A's
    assert rounds[0] != VAL[10:20]  # a seeded shuffle, not the first tasks
    assert gate_task_ids(rotate, VAL, 1) == rounds[1]  # the same seed gives the same subsets
    assert confirmation_task_ids(rotate, VAL) == VAL[50:65]


@pytest.mark.parametrize("rounds", [3, 4])
def test_gate_a_the_rotated_gates_and_confirmation_are_disjoint(rounds):
    """The issue's rule: Gate A, every rotated online gate and the confirmation set draw from
    disjoint slices of the validation split (paper-like counts: 400 tasks, 4 rounds)."""
    val = [f"val-{i:04d}" for i in range(400)]
    rotate = TrainerConfig(
        rounds=rounds,
        gate=GateConfig(val_tasks=70, val_policy="rotate", confirm_tasks=50),
    )
    sets = {"gate A": set(gate_a_task_ids(rotate, val))}
    sets |= {f"round {r}": set(gate_task_ids(rotate, val, r)) for r in range(rounds)}
    sets["confirmation"] = set(confirmation_task_ids(rotate, val))
    assert sets["gate A"] == set(val[:70])  # the cold start's gate_a_tasks: the first val_tasks
    assert all(len(tasks) == size for tasks, size in zip(
        sets.values(), [70] * (rounds + 1) + [50], strict=True
    ))  # fmt: skip
    names = list(sets)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not sets[a] & sets[b], f"{a} and {b} share tasks"


def test_fixed_gates_reuse_gate_a_and_confirmation_follows_it():
    fixed = config(confirm_tasks=5)
    assert {tuple(gate_task_ids(fixed, VAL, r)) for r in range(3)} == {tuple(VAL[:10])}
    assert gate_a_task_ids(fixed, VAL) == VAL[:10]  # the method: one split for every gate
    assert confirmation_task_ids(fixed, VAL) == VAL[10:15]
    with pytest.raises(ConfigError, match="validation tasks"):
        confirmation_task_ids(config(confirm_tasks=95), VAL)
    with pytest.raises(ConfigError, match="validation tasks"):  # Gate A + 3 x 35 > 100
        gate_task_ids(config(val_policy="rotate", val_tasks=35), VAL, 0)


def test_impossible_ablations_fail_before_anything_loads():
    with pytest.raises(ConfigError, match="overlap"):
        config(val_policy="rotate", val_pool=25)  # 3 rounds x 10 tasks need 30
    with pytest.raises(ConfigError, match="skill_loop"):
        TrainerConfig(skill_loop=False, gate=GateConfig(admit="all"))
    with pytest.raises(ConfigError, match="admit"):
        TrainerConfig.from_dict({"gate": {"admit": "some"}})


def test_the_no_mask_curriculum_always_shows_the_whole_bank():
    chunks = tuple(CurriculumChunk(i, f"c{i}", 1, f"h{i}", 0.2) for i in range(4))
    state = CurriculumState(bank_id=1, bank_hash="h", q=0.2, seed=7, chunks=chunks)
    masked = [sample_treatment(state, 1, g) for g in range(300)]
    assert any(t.mode == "skill_free" for t in masked)  # the method omits, so the switch matters
    full = [sample_treatment(unmasked(state), 1, g) for g in range(300)]
    assert {t.mode for t in full} == {"assisted"}
    assert {t.inclusion for t in full} == {(1, 1, 1, 1)}


def entry(position, chunk_id, version_id, coefficient):
    return SimpleNamespace(
        position=position,
        chunk_id=chunk_id,
        chunk_version_id=version_id,
        rho=0.5,
        coefficient=coefficient,
    )


def candidate(version_id, target=None):
    return SimpleNamespace(id=version_id, chunk_version_id=version_id, target_chunk_id=target)


def test_no_gate_admits_every_candidate_rewrites_in_place():
    bank = SimpleNamespace(entries=[entry(1, 11, 101, 0.02), entry(0, 10, 100, 0.05)])
    candidates = [candidate(200), candidate(201, target=11), candidate(202, target=99)]
    entries = admitted_entries(bank, candidates, TrainerConfig())
    assert [e["chunk_version_id"] for e in entries] == [100, 201, 200, 202]
    assert entries[0] == {"chunk_version_id": 100, "rho": 0.5, "coefficient": 0.05}
    middle = (0.2 + 0.9) / 2
    assert [e["rho"] for e in entries[1:]] == [pytest.approx(middle)] * 3
    assert all("coefficient" not in e for e in entries[1:])  # untested: no estimate
