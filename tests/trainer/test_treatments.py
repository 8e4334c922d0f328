"""Group treatments, rho mapping and the group consistency check, against the method's rules."""

from __future__ import annotations

import hashlib

import pytest

from services.trainer.treatments import (
    CurriculumChunk,
    CurriculumState,
    InconsistentGroup,
    check_group_consistent,
    sample_treatment,
)
from shared.contracts.inclusion import rho_from_coefficients


def state(rhos=(0.9, 0.55, 0.2), q=0.2, seed=20260901, bank_id=3) -> CurriculumState:
    chunks = tuple(
        CurriculumChunk(chunk_id=10 + i, slug=f"c{i}", version=1, content_hash="h" * 64, rho=rho)
        for i, rho in enumerate(rhos)
    )
    return CurriculumState(bank_id=bank_id, bank_hash="b" * 64, q=q, seed=seed, chunks=chunks)


def spec_uniform(*parts) -> float:
    """The reference's draw, written from its key layout: sha256('{a}:{b}:...')[:8] / 2**64
    (keyed on our CRN coordinates, seed:treatment:step:group, instead of its state id)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def test_draws_follow_the_reference_key_layout():
    s, step = state(), 3
    for group in range(200):
        treatment = sample_treatment(s, step, group)
        if spec_uniform(s.seed, "treatment", step, group, "skill-free") < s.q:
            assert treatment.mode == "skill_free" and not any(treatment.inclusion)
            continue
        expected = tuple(
            int(spec_uniform(s.seed, "treatment", step, group, f"chunk:{c.chunk_id}") < c.rho)
            for c in s.chunks
        )
        assert treatment.inclusion == expected
        assert treatment.mode == ("assisted" if any(expected) else "assisted_empty")


def test_marginal_exposure_is_one_minus_q_times_rho():
    s = state()
    n = 20_000
    treatments = [sample_treatment(s, 1 + group // 32, group % 32) for group in range(n)]
    skill_free = sum(t.mode == "skill_free" for t in treatments) / n
    assert skill_free == pytest.approx(0.2, abs=0.01)
    for j, chunk in enumerate(s.chunks):
        exposure = sum(t.inclusion[j] for t in treatments) / n
        assert exposure == pytest.approx(0.8 * chunk.rho, abs=0.012)
    # no chunk at all although assisted: all three rho fail at once
    empty = sum(t.mode == "assisted_empty" for t in treatments) / n
    assert empty == pytest.approx(0.8 * 0.1 * 0.45 * 0.8, abs=0.006)


def test_same_coordinates_same_treatment_and_the_state_fingerprint_covers_every_field():
    assert sample_treatment(state(), 2, 5) == sample_treatment(state(), 2, 5)
    ids = {
        state().state_id,
        state(q=0.3).state_id,
        state(seed=1).state_id,
        state(bank_id=4).state_id,
        state(rhos=(0.9, 0.55, 0.21)).state_id,
    }
    assert len(ids) == 5


def test_rho_mapping_is_the_methods_clip():
    rho = rho_from_coefficients({"a": 0.075, "b": 0.0375, "c": 2e-5})
    assert rho["a"] == pytest.approx(0.9)
    assert rho["b"] == pytest.approx(0.2 + 0.7 * 0.5)
    assert rho["c"] == pytest.approx(0.2 + 0.7 * 2e-5 / 0.075)
    assert rho_from_coefficients({"a": 0.2}, scale=0.1)["a"] == 0.9  # clipped at rho_max
    assert rho_from_coefficients({}) == {}
    with pytest.raises(ValueError, match="positive coefficient"):
        rho_from_coefficients({"a": 0.1, "b": 0.0})


def test_group_consistency_names_the_differing_field():
    sibling = {"task_id": "t1", "state_id": "s", "inclusion": (1, 0), "prompt": "p"}
    check_group_consistent([sibling, dict(sibling)])
    with pytest.raises(InconsistentGroup, match="inclusion"):
        check_group_consistent([sibling, {**sibling, "inclusion": (1, 1)}])
    with pytest.raises(InconsistentGroup, match="task_id"):
        check_group_consistent([sibling, sibling, {**sibling, "task_id": "t2"}])


def test_only_the_comparison_with_q_and_rho_depends_on_the_curriculum():
    """Common random numbers: another bank, q or rho reuses the same uniforms, so a larger q is
    skill-free wherever a smaller one is, and a chunk with a larger rho is in wherever one with a
    smaller rho is."""
    low, high = state(q=0.2, bank_id=3), state(q=0.5, bank_id=9)
    sparse, dense = state(rhos=(0.2, 0.2, 0.2)), state(rhos=(0.9, 0.9, 0.9))
    for step, group in [(s, g) for s in (1, 2, 7) for g in range(40)]:
        if sample_treatment(low, step, group).mode == "skill_free":
            assert sample_treatment(high, step, group).mode == "skill_free"
        a, b = sample_treatment(sparse, step, group), sample_treatment(dense, step, group)
        assert (a.mode == "skill_free") == (b.mode == "skill_free")
        assert all(x <= y for x, y in zip(a.inclusion, b.inclusion, strict=True))
