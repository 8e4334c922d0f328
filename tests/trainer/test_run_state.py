"""`state.json` has one schema, `RunState`, with a version: what the trainer writes validates
and reads back unchanged; the unversioned file of earlier trainers is read as version 1; a
version this trainer does not know is refused with what to do, never guessed at."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from services.trainer.config import TrainerConfig
from services.trainer.run_context import (
    STATE_FILE,
    STATE_SCHEMA_VERSION,
    RunContext,
    RunError,
    RunRecord,
    RunState,
)
from tests.trainer.run_support import CONFIGS


def a_context(tmp_path) -> RunContext:
    config = TrainerConfig.from_toml(CONFIGS / "simulated-tiny.toml")
    return RunContext(config, tmp_path, RunRecord(tmp_path, config), Console(stderr=True))


def test_the_written_state_validates_and_round_trips(tmp_path):
    context = a_context(tmp_path)
    state = RunState(round=2, phase="gate", step=8, next_group_index=40, metrics_lines=8,
                     bank_id=5, checkpoint_dir="/runs/r/checkpoints/round-002",
                     checkpoint_id="r-abc123-r2")  # fmt: skip
    context.save_state(state)
    written = json.loads((tmp_path / STATE_FILE).read_text())
    assert written["schema_version"] == STATE_SCHEMA_VERSION == 2
    assert RunState.model_validate(written) == state
    assert context.load_state() == state


def test_an_unversioned_state_of_an_earlier_trainer_is_read_as_version_1(tmp_path):
    # the keys the orchestrator wrote before the model (fresh_state + the checkpoint's)
    earlier = {
        "round": 1, "phase": "train", "step": 4, "next_group_index": 20, "metrics_lines": 4,
        "bank_id": 3, "checkpoint_dir": "/c", "checkpoint_id": "r-r0",
    }  # fmt: skip
    (tmp_path / STATE_FILE).write_text(json.dumps(earlier))
    state = a_context(tmp_path).load_state()
    assert state.model_dump(exclude={"schema_version"}) == earlier
    assert state.schema_version == STATE_SCHEMA_VERSION  # saved next as the current version


@pytest.mark.parametrize("version", [3, "2", 0])
def test_a_version_this_trainer_does_not_know_is_refused(tmp_path, version):
    state = RunState(bank_id=1).model_dump(mode="json") | {"schema_version": version}
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(RunError, match=rf"schema version {version!r}.*new --out folder"):
        a_context(tmp_path).load_state()


def test_a_state_with_a_key_the_schema_lacks_or_a_wrong_phase_is_refused():
    with pytest.raises(ValueError, match="extra"):
        RunState.model_validate({"bank_id": 1, "rnd": 2})
    with pytest.raises(ValueError, match="phase"):
        RunState(bank_id=1, phase="evaluate")
    state = RunState(bank_id=1)
    with pytest.raises(ValueError):  # assignment is checked too: a phase sets only a phase
        state.phase = "done"


def test_a_round_record_holds_what_its_phases_wrote_and_reads_back(tmp_path):
    context = a_context(tmp_path)
    record = context.record.round(1)  # round 0's entry comes first
    record.update(bank_id=5, bank_hash="h5", checkpoint_id="r-r1", candidate_ids=[3, 4])
    record.gate_status, record.adopted = "complete", True
    context.record.save()
    rounds = json.loads((tmp_path / "run.json").read_text())["rounds"]
    assert rounds == [  # a key appears once its phase wrote it, as before the model
        {"round": 0},
        {"round": 1, "bank_id": 5, "bank_hash": "h5", "checkpoint_id": "r-r1",
         "candidate_ids": [3, 4], "gate_status": "complete", "adopted": True},
    ]  # fmt: skip
    assert a_context(tmp_path).record.round(1) == record


def test_a_round_record_refuses_a_field_it_lacks_and_keeps_an_earlier_trainers_keys(tmp_path):
    context = a_context(tmp_path)
    with pytest.raises(AttributeError, match="gate_stauts"):
        context.record.round(0).update(gate_stauts="complete")
    with pytest.raises(ValueError):
        context.record.round(0).candidate_ids = ["c1"]  # candidates are registry ids
    context.record.save()
    run_json = json.loads((tmp_path / "run.json").read_text())
    run_json["rounds"] = [{"round": 0, "retired_key": 1}]  # a key no trainer writes now
    (tmp_path / "run.json").write_text(json.dumps(run_json))
    a_context(tmp_path).record.save()
    assert json.loads((tmp_path / "run.json").read_text())["rounds"] == [
        {"round": 0, "retired_key": 1}
    ]
