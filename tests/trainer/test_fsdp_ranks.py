"""accelerate's FSDP2 path with two gloo ranks on the CPU: prepare, one step's updates,
`get_state_dict`, save and resume, the weight check, the KL reference sharded like the policy.

The specification (issue 32, docs/trainer.md "Scale-out: the GPU run"): under an FSDP launch the
policy's and the reference's parameters are sharded (each rank holds part of every tensor), the
checkpoint holds the whole trained tensors, a policy resumed from it holds on every rank exactly
the shards and AdamW moments the saved one held, and the ranks' weight check reports 0.0 after
the step and a positive spread when one rank's replicated tensor differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("fsdp")
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "tests.trainer.fsdp_worker",
         str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]


def test_accelerate_shards_the_policy_and_the_reference(ranks):
    for seen in ranks:
        assert seen["distributed_type"] == "DistributedType.FSDP"
        assert seen["policy_sharded"] and seen["reference_sharded"]
        assert seen["local_numel"] < seen["full_numel"]  # each rank holds a part


def test_one_step_updates_and_the_checkpoint_holds_the_trained_tensors(ranks):
    leader = ranks[0]
    assert leader["updates"] == 2
    assert leader["changed"] == leader["tensors"]  # every tensor moved (lr 1e-3)
    assert leader["saved_equal"]


def test_a_resumed_policy_holds_the_same_shards_and_moments_on_every_rank(ranks):
    for seen in ranks:
        assert seen["reloaded_weights_equal"]
        assert seen["reloaded_moments_equal"]


def test_the_weight_check_works_under_fsdp(ranks):
    for seen in ranks:
        assert seen["spread"] == 0.0
        assert seen["replicated_buffers"] > 0
        assert seen["spread_after_perturbing_rank_1"] > 0.0
