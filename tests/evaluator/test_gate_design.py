import hashlib

import numpy as np
import pytest
from reference_data import ROUNDS, round_dir

from services.evaluator.design import (
    RANK_DEFICIENT_MESSAGE,
    DesignError,
    RankDeficientError,
    check_full_rank,
    check_mask,
    design_matrix,
    gate_a_design,
    included_ids,
    mask_row,
    online_design,
    slot_state,
)
from services.evaluator.gate_folder import read_gate_folder

TASKS = [str(i) for i in range(3000)]


@pytest.mark.parametrize("number", ROUNDS)
def test_masks_reproduce_every_reference_gate_bit_for_bit(number):
    # Pins the key layout: "{seed}:{split}:{task}:{sample}:{logical slot id}", first 8 bytes
    # big-endian mod (versions + 1), split "val", sample 0, task id as the bare integer string.
    data = read_gate_folder(round_dir(number))
    assert len(data.observations) == 400
    for observation in data.observations:
        assert mask_row(data.design, observation.task_id, 0) == observation.mask


def test_online_layout_current_first_families_then_adds_by_candidate_id():
    design = online_design(
        ["c1", "c2", "c3"], adds=["online-b", "online-a"], rewrites={"c2": ["new-z", "new-y"]}
    )
    assert design.column_ids == ("c1", "c2", "new-y", "new-z", "c3", "online-a", "online-b")
    assert [slot.order for slot in design.slots] == [1, 2, 3, 4, 5]
    assert [slot.n_states for slot in design.slots] == [2, 4, 2, 2, 2]
    assert design.version("new-y").logical_id == "c2"
    assert design.version("new-y").kind == "rewrite"
    assert design.version("online-a").kind == "add"


def test_bad_layouts_are_refused():
    with pytest.raises(DesignError, match="not a current chunk: ghost"):
        online_design(["c1"], rewrites={"ghost": ["n1"]})
    with pytest.raises(DesignError, match="duplicate"):
        online_design(["c1", "c1"])
    with pytest.raises(DesignError, match="duplicate"):
        online_design(["c1"], adds=["c1"])
    with pytest.raises(DesignError, match="at least one"):
        online_design([])


def test_state_frequencies_are_uniform_over_each_slot():
    design = online_design(["plain"], adds=["add"], rewrites={"plain": ["n1"]})
    family, add = design.slots
    counts = np.bincount([slot_state(design, family, task) for task in TASKS], minlength=3)
    assert all(abs(c / len(TASKS) - 1 / 3) < 0.03 for c in counts)
    present = np.mean([slot_state(design, add, task) for task in TASKS])
    assert abs(present - 0.5) < 0.03


def test_old_and_new_never_cooccur_and_rows_pass_the_mask_check():
    design = online_design(["a", "b"], rewrites={"a": ["a2", "a3"]})
    for task in TASKS[:500]:
        row = mask_row(design, task)
        check_mask(design, row)
        assert sum(row[:3]) <= 1
    with pytest.raises(DesignError, match="two versions of a"):
        check_mask(design, (1, 1, 0, 0))
    with pytest.raises(DesignError, match="entries"):
        check_mask(design, (1, 0))
    assert included_ids(design, (0, 0, 1, 1)) == ("a3", "b")


def test_gate_a_uses_the_top_bit_bernoulli_rule():
    design = gate_a_design(["d1", "d2", "d3"])
    for task in TASKS[:200]:
        row = mask_row(design, task)
        for slot, value in zip(design.slots, row, strict=True):
            key = f"20260901:val:{task}:0:{slot.logical_id}".encode()
            draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
            assert value == int(draw < 2**63)
    share = design_matrix(design, TASKS).mean()
    assert abs(share - 0.5) < 0.02
    with pytest.raises(DesignError, match="no replacement families"):
        from services.evaluator.design import GateDesign

        GateDesign("gate_a", online_design(["a"], rewrites={"a": ["b"]}).slots)


def test_masks_depend_on_seed_split_task_and_sample():
    base = online_design([f"c{i}" for i in range(12)])
    other_seed = online_design([f"c{i}" for i in range(12)], mask_seed=1)
    test_split = online_design([f"c{i}" for i in range(12)], split="test")
    rows = [mask_row(base, task) for task in TASKS[:50]]
    assert rows == [mask_row(base, task) for task in TASKS[:50]]
    assert rows != [mask_row(other_seed, task) for task in TASKS[:50]]
    assert rows != [mask_row(test_split, task) for task in TASKS[:50]]
    assert rows != [mask_row(base, task, sample=1) for task in TASKS[:50]]


def test_full_rank_check_runs_before_any_rollout():
    design = online_design([f"c{i}" for i in range(16)])
    check_full_rank(design_matrix(design, TASKS[:400]))
    with pytest.raises(RankDeficientError, match=RANK_DEFICIENT_MESSAGE):
        check_full_rank(design_matrix(design, TASKS[:16]))  # n must exceed p
    matrix = design_matrix(design, TASKS[:100])
    matrix[:, 3] = matrix[:, 2]  # two columns that always move together
    with pytest.raises(RankDeficientError, match="change the mask seed or add tasks"):
        check_full_rank(matrix)
