"""The method's gate randomizes over current chunks and candidates: with neither there is nothing
to test, so S_t stays and no gate is asked for (the evaluator refuses an empty design)."""

from __future__ import annotations

from types import SimpleNamespace

from services.trainer.config import TrainerConfig
from services.trainer.orchestrator import Run, ServiceUrls

CONFIG = "configs/simulated-tiny.toml"


class RecordingRegistryDouble:
    """A registry TEST DOUBLE serving one frozen bank with the given number of entries."""

    def __init__(self, n_entries: int) -> None:
        self.n_entries = n_entries

    def bank_summary(self, bank_id):
        return SimpleNamespace(status=SimpleNamespace(value="frozen"))

    def get_bank(self, bank_id, revalidate=False):
        return SimpleNamespace(entries=[object()] * self.n_entries, content_hash="h")


class RecordingEvaluatorDouble:
    """An evaluator TEST DOUBLE that records every gate asked of it and answers a complete one."""

    def __init__(self) -> None:
        self.submitted: list[dict] = []

    def gate_job(self, job_id):
        return None

    def find_gate(self, **_):
        return None

    def submit_gate(self, body):
        self.submitted.append(body)
        return {"id": "job-1", "status": "queued"}

    def wait(self, job_id, **_):
        registry = {"bank_id": 99, "gate_run_id": 7, "decision_id": 8}
        return {"status": "succeeded", "result": {"status": "complete", "registry": registry}}


def a_run(tmp_path, n_entries: int, candidates: list[int]):
    run = Run(TrainerConfig.from_toml(CONFIG), tmp_path, urls=ServiceUrls(), initial_bank=None)
    run.registry, run.evaluator = RecordingRegistryDouble(n_entries), RecordingEvaluatorDouble()
    run.record["services"] = {"evaluator": "http://127.0.0.1:9"}
    run.round_record(0)["candidate_ids"] = candidates
    state = {"round": 0, "phase": "gate", "bank_id": 5, "checkpoint_id": "ckpt"}
    run.gate_round(state)
    return run, state


def test_an_empty_bank_without_candidates_keeps_s_t_and_asks_no_gate(tmp_path):
    run, state = a_run(tmp_path, n_entries=0, candidates=[])
    assert run.evaluator.submitted == []
    assert state == {"round": 1, "phase": "train", "bank_id": 5, "checkpoint_id": "ckpt"}
    record = run.round_record(0)
    assert record["adopted"] is False and record["next_bank_id"] == 5
    assert record["gate_status"].startswith("skipped")


def test_a_gate_runs_when_the_bank_or_the_candidates_give_it_something_to_test(tmp_path):
    for n_entries, candidates in ((0, [11]), (2, [])):
        run, state = a_run(tmp_path / f"{n_entries}-{len(candidates)}", n_entries, candidates)
        assert len(run.evaluator.submitted) == 1
        assert run.evaluator.submitted[0]["candidate_ids"] == candidates
        assert state["bank_id"] == 99 and run.round_record(0)["adopted"] is True
