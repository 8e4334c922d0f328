"""The trainer stays alive through a long gate (issue 20, blocker 8).

The Kubernetes liveness probe passes while something in the run folder changed in the last 90
minutes; a trainer waiting on a gate or a compile writes nothing else, so it keeps a heartbeat
file fresh while it waits, and only then.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console

import services.trainer.heartbeat as heartbeat_module
from services.trainer.config import TrainerConfig
from services.trainer.heartbeat import HEARTBEAT_FILE, heartbeat
from services.trainer.orchestrator import Run

ROOT = Path(__file__).resolve().parents[2]


def test_the_heartbeat_beats_while_the_block_runs_and_stops_after(tmp_path) -> None:
    path = tmp_path / HEARTBEAT_FILE
    with heartbeat(tmp_path, every_s=0.05):
        first = path.stat().st_mtime_ns
        time.sleep(0.3)
        assert path.stat().st_mtime_ns > first
    last = path.stat().st_mtime_ns
    time.sleep(0.2)
    assert path.stat().st_mtime_ns == last


class LongGate:
    """A stand-in evaluator whose gate takes a while; it records whether the run folder's
    heartbeat moved while the trainer waited on it."""

    def __init__(self, out: Path) -> None:
        self.beat = out / HEARTBEAT_FILE
        self.moved: list[bool] = []

    def find_gate(self, **_) -> None:
        return None

    def submit_gate(self, body: dict) -> dict:
        return {"id": "gate-1", "status": "queued"}

    def wait(self, job_id: str, **_) -> dict:
        before = self.beat.stat().st_mtime_ns
        time.sleep(0.4)
        self.moved.append(self.beat.stat().st_mtime_ns > before)
        result = {"status": "complete", "registry": {"bank_id": 8, "gate_run_id": 1}}
        return {"id": job_id, "status": "succeeded", "result": result}


def test_the_trainer_beats_while_it_waits_on_a_gate(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_EVERY_S", 0.05)
    run = Run.__new__(Run)  # only what gate_round reads: no services, no model
    run.config = TrainerConfig.from_toml(ROOT / "configs" / "procedural.toml")
    run.out, run.console = tmp_path, Console(file=io.StringIO())
    run.record = {"services": {"evaluator": "http://evaluator"}, "rounds": []}
    run.evaluator = LongGate(tmp_path)
    run.round_record(0)["candidate_ids"] = ["c1"]
    state = {"round": 0, "phase": "gate", "bank_id": 7, "checkpoint_id": "run-r0"}
    run.gate_round(state)
    assert run.evaluator.moved == [True]
    assert state == {**state, "round": 1, "phase": "train", "bank_id": 8}


@pytest.mark.parametrize("every_s", [None, 0.05])
def test_the_default_period_is_well_inside_the_probe_window(tmp_path, every_s) -> None:
    with heartbeat(tmp_path, every_s=every_s):
        pass
    assert heartbeat_module.HEARTBEAT_EVERY_S * 10 < 90 * 60  # ten beats per window at least
