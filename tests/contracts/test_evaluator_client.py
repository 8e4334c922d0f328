"""The evaluator's client as its callers meet it: retries and the job wait against a real HTTP
server on loopback (`ScriptedEvaluator`, a TEST DOUBLE that answers each route with the next
of its scripted answers and notes every request; tests/contracts/scripted_evaluator.py), no
patched transport."""

from __future__ import annotations

import socket

import pytest

from shared.contracts.evaluator_api.client import (
    QUOTE_CHARS,
    EvaluatorError,
    EvaluatorUnavailable,
    JobFailed,
)
from shared.contracts.evaluator_api.schemas import DESIGN_NOT_IDENTIFIED, GateJobCreate
from tests.contracts.scripted_evaluator import client, job, serving

GATE = GateJobCreate(round=0, checkpoint_id="ckpt-0", n_tasks=12, candidate_ids=[3])


def test_a_submission_lost_to_5xx_is_retried_with_the_same_key_and_gives_one_job():
    script = {
        ("POST", "/v1/gate-jobs"): [(503, {"detail": "busy"}), (502, {}), (202, job("queued"))]
    }
    with serving(script) as (evaluator, gates):
        queued = gates.submit("gate", GATE)
    assert queued.id == "job-1" and queued.status == "queued"
    posts = [request for request in evaluator.requests if request[0] == "POST"]
    assert len(posts) == 3
    assert len({key for _, _, key, _ in posts}) == 1 and posts[0][2]  # one key, repeated
    assert posts[0][3]["checkpoint_id"] == "ckpt-0" and posts[0][3]["candidate_ids"] == [3]


def test_wait_for_job_polls_until_success_and_shows_every_poll():
    polls = [(200, job("queued")), (200, job("running")), (503, {}), (200, job("succeeded"))]
    seen = []
    with serving({("GET", "/v1/gate-jobs/job-1"): polls}) as (_evaluator, gates):
        done = gates.wait_for_job(
            "gate", "job-1", poll=0.01, timeout=30, progress=lambda j: seen.append(j.status)
        )
    assert done.status == "succeeded"
    assert seen == ["queued", "running", "succeeded"]  # the 503 was retried, not shown


def test_a_failed_job_raises_job_failed_carrying_the_job():
    failed = job("failed", error="interrupted")
    with (
        serving({("GET", "/v1/gate-jobs/job-1"): [(200, failed)]}) as (_evaluator, gates),
        pytest.raises(JobFailed) as raised,
    ):
        gates.wait_for_job("gate", "job-1", poll=0.01, timeout=30)
    assert raised.value.job.error == "interrupted" and "interrupted" in str(raised.value)


def test_a_job_still_running_at_the_timeout_is_a_timeout_error_naming_it():
    with (
        serving({("GET", "/v1/eval-jobs/job-1"): [(200, job("running"))]}) as (_evaluator, evals),
        pytest.raises(TimeoutError, match="still running"),
    ):
        evals.wait_for_job("eval", "job-1", poll=0.01, timeout=0.1)


def test_a_422_is_typed_and_its_message_quotes_only_the_start_of_a_long_detail():
    detail = [{"loc": ["body"], "msg": "x" * 5000, "type": DESIGN_NOT_IDENTIFIED}]
    with (
        serving({("POST", "/v1/gate-jobs"): [(422, {"detail": detail})]}) as (evaluator, gates),
        pytest.raises(EvaluatorError) as refused,
    ):
        gates.submit("gate", GATE)
    assert refused.value.status_code == 422 and refused.value.detail == detail
    assert refused.value.error_types == {DESIGN_NOT_IDENTIFIED}
    assert len(str(refused.value)) < QUOTE_CHARS + 100  # not the 5,000-character body
    assert len(evaluator.requests) == 1  # a refusal is not retried


def test_an_evaluator_that_stays_busy_or_unreachable_is_unavailable():
    busy = {("GET", "/v1/gate-jobs"): [(503, {"detail": "busy"})]}
    with serving(busy, retries=2) as (evaluator, gates), pytest.raises(EvaluatorUnavailable):
        gates.list_jobs("gate")
    assert len(evaluator.requests) == 3  # the first try and two retries
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with client(url, retries=1) as gates, pytest.raises(EvaluatorUnavailable) as gone:
        gates.get_job("gate", "job-1")
    assert gone.value.status_code == 0 and url in str(gone.value)


def test_find_job_is_none_for_a_job_the_evaluator_does_not_know():
    with serving({}) as (_evaluator, gates):
        assert gates.find_job("gate", "gone") is None


def test_find_gate_takes_the_newest_unfailed_job_of_the_round_and_checkpoint():
    mine = {"round": 2, "checkpoint_id": "c"}
    jobs = [
        job("succeeded", id="old", request=mine, created_at="2026-01-01T00:00:00+00:00"),
        job("running", id="new", request=mine, created_at="2026-01-02T00:00:00+00:00"),
        job("failed", id="newest-failed", request=mine, created_at="2026-01-03T00:00:00+00:00"),
        job("running", id="other", request={"round": 3, "checkpoint_id": "c"}),
    ]
    with serving({("GET", "/v1/gate-jobs"): [(200, jobs)]}) as (_evaluator, gates):
        assert gates.find_gate(round_index=2, checkpoint_id="c").id == "new"
        assert gates.find_gate(round_index=9, checkpoint_id="c") is None
