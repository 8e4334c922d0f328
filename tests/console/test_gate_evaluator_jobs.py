"""The gate page links the evaluator's jobs that recorded the gate run, read through the
evaluator's client with the user's own token; an evaluator that refuses or is away leaves the
page without links, never an error (a scripted evaluator TEST DOUBLE on loopback)."""

from __future__ import annotations

from services.console.pages.gates import EvaluatorJobLink, _evaluator_jobs
from tests.contracts.scripted_evaluator import job, serving


def recorded(job_id: str, gate_run_id: int) -> dict:
    return job("succeeded", id=job_id, result={"registry": {"gate_run_id": gate_run_id}})


def test_the_jobs_that_recorded_the_gate_run_are_linked():
    script = {
        ("GET", "/v1/gate-jobs"): [(200, [recorded("g-1", 7), recorded("g-2", 8)])],
        ("GET", "/v1/gate-a-jobs"): [(200, [recorded("a-1", 7), job("running", id="a-2")])],
    }
    with serving(script) as (evaluator, _client):
        links = _evaluator_jobs(evaluator.url, 7, "user-token")
    assert links == [
        EvaluatorJobLink("g-1", "succeeded", f"{evaluator.url}/v1/gate-jobs/g-1"),
        EvaluatorJobLink("a-1", "succeeded", f"{evaluator.url}/v1/gate-a-jobs/a-1"),
    ]


def test_an_evaluator_that_refuses_or_fails_leaves_no_links_and_is_asked_once():
    for status in (403, 503):
        with serving({("GET", "/v1/gate-jobs"): [(status, {"detail": "no"})]}) as (double, _):
            assert _evaluator_jobs(double.url, 7, "user-token") == []
        assert len(double.requests) == 1  # the page does not wait on retries
    assert _evaluator_jobs(None, 7, "user-token") == []
