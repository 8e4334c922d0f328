"""Bearer tokens at the evaluator, as its callers meet it: the real `intraskill gate serve`
process on loopback (procedural TEST DOUBLE backend, the live registry), admitting one grant per
role (EVALUATOR_TOKENS, the list the registry holds too).

`ROLES_OF` is the policy written down by hand, not read from the code: no token or an unknown
one is a 401 (before the body is even validated), a role the route does not admit a 403, the
admitted roles get through; `/healthz`, `/readyz` and `/metrics` answer without a token. Then
the callers themselves: the trainer's client, the analyst's Gate A call and an operator's
evaluation, each with its own token.
"""

from __future__ import annotations

import time

import httpx
import pytest
from registry_server import TOKENS

from services.analyst.cold_start import _evaluator_gate_a
from services.analyst.settings import AnalystSettings
from shared.contracts.evaluator_api.client import EvaluatorClient, EvaluatorError
from shared.contracts.registry_api.client import RegistryClient
from tests.live_servers import free_port
from tests.service_auth import (
    ANONYMOUS,
    assert_concurrent_callers_each_get_their_roles_answer,
    assert_probes_and_metrics_are_anonymous,
    assert_registry_gone_is_not_ready_and_still_guarded,
    assert_route_admits_only,
    published_policy,
)
from tests.service_servers import evaluator_serving as serving

OBSERVERS = {"operator", "reader"}
ROLES_OF = {
    ("POST", "/v1/gate-jobs"): {"trainer"},
    ("POST", "/v1/gate-a-jobs"): {"analyst"},
    ("POST", "/v1/eval-jobs"): {"operator"},
    ("POST", "/v1/refits"): {"trainer"} | OBSERVERS,
    ("GET", "/v1/gate-jobs"): {"trainer"} | OBSERVERS,
    ("GET", "/v1/gate-jobs/{job_id}"): {"trainer"} | OBSERVERS,
    ("GET", "/v1/gate-a-jobs"): {"analyst"} | OBSERVERS,
    ("GET", "/v1/gate-a-jobs/{job_id}"): {"analyst"} | OBSERVERS,
    ("GET", "/v1/eval-jobs/{job_id}"): OBSERVERS,
}


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


@pytest.fixture(scope="module")
def evaluator(registry_url, tmp_path_factory):
    with serving(registry_url, tmp_path_factory.mktemp("evaluator-auth")) as url:
        yield url


def test_the_written_policy_is_every_route_the_service_publishes(evaluator):
    """Each operation's published `x-roles` is the policy above, and only the probes go
    without: a new route without a role check would show up here."""
    published, anonymous = published_policy(evaluator)
    assert published == ROLES_OF
    assert anonymous == ANONYMOUS


@pytest.mark.parametrize(("method", "route"), sorted(ROLES_OF))
def test_no_token_401_wrong_role_403_right_role_through(evaluator, method, route):
    path = route.replace("{job_id}", "job-nope")
    assert_route_admits_only(evaluator, method, path, ROLES_OF[(method, route)], TOKENS)


def test_probes_and_metrics_answer_without_a_token(evaluator):
    assert_probes_and_metrics_are_anonymous(evaluator)


def test_callers_above_the_worker_pool_each_get_their_roles_answer(evaluator):
    route = ("GET", "/v1/gate-jobs")
    assert_concurrent_callers_each_get_their_roles_answer(
        evaluator, route[1], ROLES_OF[route], TOKENS
    )


def test_with_its_registry_gone_it_is_not_ready_and_still_guarded(tmp_path):
    with serving(f"http://127.0.0.1:{free_port()}", tmp_path) as url:  # nothing listens there
        assert_registry_gone_is_not_ready_and_still_guarded(url, "/v1/gate-jobs", "trainer", TOKENS)


def test_the_trainers_client_sends_its_token(evaluator):
    with_token = EvaluatorClient(evaluator, token=TOKENS["trainer"], retries=0)
    assert with_token.find_gate(round_index=0, checkpoint_id="nope") is None
    with_token.close()
    for token, status in ((None, 401), (TOKENS["analyst"], 403)):
        client = EvaluatorClient(evaluator, token=token, retries=0)
        with pytest.raises(EvaluatorError) as refused:
            client.find_gate(round_index=0, checkpoint_id="nope")
        client.close()
        assert refused.value.status_code == status


def test_the_analysts_gate_a_call_sends_its_evaluator_token(evaluator, tmp_path):
    settings = AnalystSettings(evaluator_url=evaluator, data_dir=tmp_path)
    with pytest.raises(LookupError, match="ANALYST_EVALUATOR_TOKEN"):
        _evaluator_gate_a(settings)({})
    for role, status in (("analyst", 422), ("trainer", 403)):  # 422: admitted, body checked
        as_role = AnalystSettings(
            evaluator_url=evaluator, evaluator_token=TOKENS[role], data_dir=tmp_path
        )
        with pytest.raises(EvaluatorError) as answer:
            _evaluator_gate_a(as_role)({"draft_version_ids": []})
        assert answer.value.status_code == status, answer.value.detail


def test_an_operators_evaluation_runs_and_readers_follow_it(evaluator, registry_url):
    checkpoint = f"auth-{time.monotonic_ns()}"
    with RegistryClient(registry_url, TOKENS["trainer"]) as trainer:
        trainer.create_checkpoint(checkpoint, uri="file:///procedural-test-double", step=0, round=0)
    body = {
        "conditions": [{"name": "base/bare", "checkpoint_id": checkpoint}],
        "split": "test",
        "n_tasks": 4,
        "resamples": 100,
    }
    refused = httpx.post(f"{evaluator}/v1/eval-jobs", json=body, headers=bearer("trainer"))
    assert refused.status_code == 403
    answer = httpx.post(
        f"{evaluator}/v1/eval-jobs", json=body, headers=bearer("operator"), timeout=300
    )
    assert answer.status_code == 202, answer.text
    location = f"{evaluator}{answer.headers['location']}"
    deadline = time.monotonic() + 300
    while (job := httpx.get(location, headers=bearer("reader"), timeout=60).json())["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    assert job["status"] == "succeeded", job.get("error")
    assert httpx.get(location, headers=bearer("trainer"), timeout=60).status_code == 403
