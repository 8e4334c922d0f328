"""The trainer stays alive through a long gate (issue 20, blocker 8).

The Kubernetes liveness probe passes while something in the run folder changed in the last 90
minutes; a trainer waiting on a gate or a compile writes nothing else, so it keeps a heartbeat
file fresh while it waits, and only then.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

import services.trainer.heartbeat as heartbeat_module
from services.trainer.config import TrainerConfig
from services.trainer.gate_round import gate_round
from services.trainer.heartbeat import HEARTBEAT_FILE, heartbeat
from services.trainer.run_context import RunContext, RunRecord, RunState
from shared.contracts.evaluator_api.schemas import GateJobCreate, JobPublic

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

    def submit(self, kind: str, body: GateJobCreate) -> JobPublic:
        return self.job("queued")

    def wait_for_job(self, kind: str, job_id: str, **_) -> JobPublic:
        before = self.beat.stat().st_mtime_ns
        time.sleep(0.4)
        self.moved.append(self.beat.stat().st_mtime_ns > before)
        registry = {"bank_id": 8, "gate_run_id": 1}
        return self.job("succeeded", {"status": "complete", "registry": registry})

    @staticmethod
    def job(status: str, result: dict | None = None) -> JobPublic:
        return JobPublic(
            id="gate-1", kind="gate", status=status, request={}, created_at="2026-01-01",
            started_at=None, finished_at=None, progress={}, result=result, error=None,
        )  # fmt: skip


def test_the_trainer_beats_while_it_waits_on_a_gate(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_EVERY_S", 0.05)
    config = TrainerConfig.from_toml(ROOT / "configs" / "procedural.toml")
    context = RunContext(
        config=config, out=tmp_path, record=RunRecord(tmp_path, config),
        console=Console(file=io.StringIO()),
    )  # fmt: skip
    evaluator = LongGate(tmp_path)
    context.clients = SimpleNamespace(evaluator=evaluator, registry=None)  # what gate_round reads
    context.record.data["services"] = {"evaluator": "http://evaluator"}
    context.record.round(0).candidate_ids = [1]
    state = RunState(round=0, phase="gate", bank_id=7, checkpoint_id="run-r0")
    assert gate_round(context, state) == 8  # S_{t+1}: the gate's bank
    assert evaluator.moved == [True]


@pytest.mark.parametrize("every_s", [None, 0.05])
def test_the_default_period_is_well_inside_the_probe_window(tmp_path, every_s) -> None:
    with heartbeat(tmp_path, every_s=every_s):
        pass
    assert heartbeat_module.HEARTBEAT_EVERY_S * 10 < 90 * 60  # ten beats per window at least
