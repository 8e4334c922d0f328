"""The whole loop with the REAL analyst on loopback: the procedural TEST DOUBLE policy acts (in
the trainer, in the analyst's retries and live tests, and in the gate), so a short local
`intraskill train run` compiles real candidates into the registry and gates S_t with them.

What is asserted comes from the method's interval schedule: every all-wrong group reaches the
analyst, the candidates it compiles are proposed on the round's frozen checkpoint, and the gate
runs on that checkpoint over the frozen bank's chunks plus one column per candidate.
"""

from __future__ import annotations

import json

from services.trainer.config import TrainerConfig
from tests.trainer.run_support import CONFIGS, registry_rows, run_train

PROCEDURAL = CONFIGS / "procedural-small.toml"


def test_a_local_procedural_run_compiles_real_candidates_and_gates_them(tmp_path):
    config = TrainerConfig.from_toml(PROCEDURAL)
    out = tmp_path / "procedural"
    done = run_train(PROCEDURAL, out, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["finished"] and "analyst" in run["services"]["local"]  # the real one
    [record] = run["rounds"]
    assert config.rounds == 1

    # the real analyst saw every all-wrong group and retried each on the frozen checkpoint
    evidence = registry_rows(out, "all_wrong_groups")
    funnel = record["funnel"]
    assert record["all_wrong_groups"] == len(evidence) == funnel["all_wrong_groups"] > 0
    assert funnel["retries"] == len(evidence)

    # real candidates, written by the analyst's role, proposed on this round's checkpoint
    candidates = registry_rows(out, "candidates")
    assert 0 < len(candidates) <= config.gate.max_candidates
    assert sorted(c["id"] for c in candidates) == sorted(record["candidate_ids"])
    assert {c["created_by"] for c in candidates} == {"local-analyst"}
    assert {c["proposal_checkpoint"] for c in candidates} == {record["checkpoint_id"]}

    # the gate ran on the frozen checkpoint over S_t's chunks plus every candidate
    [gate] = registry_rows(out, "gate_runs")
    assert gate["status"] == "complete" and gate["id"] == record["gate_run_id"]
    assert gate["checkpoint_id"] == record["checkpoint_id"]
    assert gate["base_bank_id"] == record["bank_id"]
    columns = json.loads(gate["candidate_pool"])["columns"]
    bank_chunks = [
        row["chunk_version_id"]
        for row in registry_rows(out, "bank_entries")
        if row["bank_id"] == record["bank_id"]
    ]
    current = [c["chunk_version_id"] for c in columns if c["kind"] == "current"]
    assert sorted(current) == sorted(bank_chunks)
    gated = sorted(c["candidate_id"] for c in columns if c["kind"] != "current")
    assert gated == sorted(c["id"] for c in candidates)
