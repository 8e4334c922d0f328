"""The method's gate randomizes over current chunks and candidates: with neither there is nothing
to test, so S_t stays and no gate is asked for (the evaluator refuses an empty design). A gate
whose masks cannot identify the coefficients is drawn again from the next mask seeds; when none
of them can, the gate has not completed and S_t stays (the method's rule)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from rich.console import Console

from services.trainer.config import TrainerConfig
from services.trainer.gate_round import MASK_SEED_ATTEMPTS, gate_round
from services.trainer.run_context import RunContext, RunError, RunRecord, RunState
from services.trainer.service_lifecycle import ServiceClients
from shared.contracts.evaluator_api.client import EvaluatorError
from shared.contracts.evaluator_api.schemas import DESIGN_NOT_IDENTIFIED, JobPublic
from tests.contracts.scripted_evaluator import serving

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

    def find_job(self, kind, job_id):
        return None

    def find_gate(self, **_):
        return None

    def submit(self, kind, body):
        assert kind == "gate"
        self.submitted.append(body.model_dump())
        return a_job("queued")

    def wait_for_job(self, kind, job_id, **_):
        registry = {"bank_id": 99, "gate_run_id": 7, "decision_id": 8}
        return a_job("succeeded", {"status": "complete", "registry": registry})


def a_job(status: str, result: dict | None = None) -> JobPublic:
    return JobPublic(
        id="job-1", kind="gate", status=status, request={}, created_at="2026-01-01T00:00:00",
        started_at=None, finished_at=None, progress={}, result=result, error=None,
    )  # fmt: skip


class RefusingEvaluatorDouble(RecordingEvaluatorDouble):
    """An evaluator TEST DOUBLE that refuses the first `refusals` gates with a 422 of `kind`."""

    def __init__(self, refusals: int, kind: str = DESIGN_NOT_IDENTIFIED) -> None:
        super().__init__()
        self.refusals, self.kind = refusals, kind

    def submit(self, kind, body):
        if len(self.submitted) < self.refusals:
            self.submitted.append(body.model_dump())
            detail = [{"loc": ["body"], "msg": "rank deficient", "type": self.kind}]
            raise EvaluatorError(422, detail, "POST", "/v1/gate-jobs")
        return super().submit(kind, body)


def a_run(tmp_path, n_entries: int, candidates: list[int], evaluator=None, admit=None):
    config = TrainerConfig.from_toml(CONFIG)
    if admit is not None:
        config = config.with_(gate=replace(config.gate, admit=admit))
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = RunContext(config, tmp_path, RunRecord(tmp_path, config), Console(stderr=True))
    urls = {"evaluator": "http://127.0.0.1:9"}
    run.clients = ServiceClients(
        RecordingRegistryDouble(n_entries), evaluator or RecordingEvaluatorDouble(), None, urls
    )
    run.record.data["services"] = urls
    run.record.round(0).candidate_ids = candidates
    state = RunState(round=0, phase="gate", bank_id=5, checkpoint_id="ckpt")
    next_bank = gate_round(run, state)
    return run, next_bank


def test_an_empty_bank_without_candidates_keeps_s_t_and_asks_no_gate(tmp_path):
    run, next_bank = a_run(tmp_path, n_entries=0, candidates=[])
    assert run.clients.evaluator.submitted == []
    assert next_bank == 5
    record = run.record.round(0)
    assert record.adopted is False and record.next_bank_id == 5
    assert record.gate_status.startswith("skipped")


def test_a_gate_runs_when_the_bank_or_the_candidates_give_it_something_to_test(tmp_path):
    for n_entries, candidates in ((0, [11]), (2, [])):
        run, next_bank = a_run(tmp_path / f"{n_entries}-{len(candidates)}", n_entries, candidates)
        assert len(run.clients.evaluator.submitted) == 1
        assert run.clients.evaluator.submitted[0]["candidate_ids"] == candidates
        assert next_bank == 99 and run.record.round(0).adopted is True


def test_the_gate_admits_by_the_lower_bound_only_when_the_config_says_so(tmp_path):
    (default,) = a_run(tmp_path / "gate", 2, [11])[0].clients.evaluator.submitted
    assert default["admit"] == "coefficient"  # the method's rule: beta > 0
    (strict,) = a_run(tmp_path / "lb", 2, [11], admit="lower_bound")[0].clients.evaluator.submitted
    assert strict["admit"] == "lower_bound"


def test_an_unidentifiable_design_is_drawn_again_from_the_next_mask_seed(tmp_path):
    run, next_bank = a_run(tmp_path, 2, [11], evaluator=RefusingEvaluatorDouble(refusals=2))
    first = run.config.gate.mask_seed
    assert [body["mask_seed"] for body in run.clients.evaluator.submitted] == [
        first,
        first + 1,
        first + 2,
    ]
    assert run.record.round(0).mask_seed == first + 2
    assert next_bank == 99 and run.record.round(0).adopted is True


def test_when_no_mask_seed_identifies_the_design_s_t_stays_and_training_goes_on(tmp_path):
    run, next_bank = a_run(tmp_path, 2, [11], evaluator=RefusingEvaluatorDouble(refusals=99))
    assert len(run.clients.evaluator.submitted) == MASK_SEED_ATTEMPTS
    assert next_bank == 5
    record = run.record.round(0)
    assert record.adopted is False and record.next_bank_id == 5
    assert record.gate_status == "skipped: no identifiable design"


def test_any_other_refusal_stops_the_run_without_a_second_try(tmp_path):
    evaluator = RefusingEvaluatorDouble(refusals=99, kind="value_error")
    with pytest.raises(RunError, match="the evaluator refused the gate"):
        a_run(tmp_path, 2, [11], evaluator=evaluator)
    assert len(evaluator.submitted) == 1


def test_an_evaluator_that_keeps_answering_503_stops_the_run_as_unreachable(tmp_path):
    busy = {("GET", "/v1/gate-jobs"): [(503, {"detail": "busy"})]}  # every retry spent
    with (
        serving(busy, retries=1) as (_double, evaluator),
        pytest.raises(RunError, match="unreachable after retries"),
    ):
        a_run(tmp_path, 2, [11], evaluator=evaluator)
