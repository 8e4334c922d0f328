"""Helpers of the evaluator's service tests: the app wired to the simulated rollouts (a test
double of the policy backend) and the live registry, a client that sends each request with the
token of the role that makes it in deployment, plus small factories."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from registry_server import GRANTS, TOKENS

from services.evaluator.app import create_app
from services.evaluator.pairing import RolloutIdentity
from services.evaluator.rollouts import SimulatedRolloutRunner
from services.evaluator.settings import EvaluatorSettings
from services.evaluator.simulation import SimulatedPolicy, uniform_base_rate
from shared.contracts.registry_api.client import RegistryClient
from tests.evaluator.bodies import card_body, content  # noqa: F401  (the tests import them here)


def client(url, role="evaluator") -> RegistryClient:
    return RegistryClient(url, TOKENS[role])


def simulated_identity(checkpoint_id: str, split: str) -> RolloutIdentity:
    """What the simulated runner's rollouts record (the test double's fixed identity)."""
    return RolloutIdentity(
        checkpoint_id=checkpoint_id,
        model="simulated-policy",
        decoding="dec",
        prompt_version="layout",
        prompt_fingerprint="fp",
        env_version="shopsim-test",
        action_protocol="tools-v3",
        split=split,
    )


def make_app(
    registry_url,
    tmp_path,
    *,
    tasks,
    base_rate=(0.25, 0.35),
    fail=None,
    checkpoint_override=None,
    on_runner=None,
):
    """The evaluator app on `tasks`; set `state["effects"]` (true effects) before a job runs."""
    settings = EvaluatorSettings(
        registry_url=registry_url,
        registry_token=TOKENS["evaluator"],
        tokens=GRANTS,
        jobs_dir=tmp_path / "jobs",
    )
    state = {}

    def runner_factory(checkpoint_id, uri, split):
        state["uri"] = uri
        if on_runner is not None:
            on_runner()
        identity = simulated_identity(checkpoint_override or checkpoint_id, split)
        policy = SimulatedPolicy(state["effects"], uniform_base_rate(*base_rate), seed=1)
        return SimulatedRolloutRunner(policy, identity, fail=fail)

    app = create_app(settings, runner_factory=runner_factory, task_source=lambda split: tasks)
    return app, state, settings


# Who sends each job submission in deployment; everything else (polls, lists, refits) is read
# here as an operator would.
SUBMITTED_BY = {
    "/v1/gate-jobs": "trainer",
    "/v1/gate-a-jobs": "analyst",
    "/v1/eval-jobs": "operator",
}


class CallerClient(TestClient):
    """A TestClient that sends each request with the token of the role whose request it is
    (an explicit Authorization header wins)."""

    def request(self, method: str, url, **kwargs):
        role = SUBMITTED_BY.get(str(url).split("?")[0], "operator") if method == "POST" else None
        headers = {"Authorization": f"Bearer {TOKENS[role or 'operator']}"}
        kwargs["headers"] = {**headers, **(kwargs.get("headers") or {})}
        return super().request(method, url, **kwargs)


def service_client(app) -> TestClient:
    """A TestClient on `app` that authenticates each request as its caller would."""
    return CallerClient(app)


def wait(http: TestClient, location: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = http.get(location).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
