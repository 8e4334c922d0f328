"""Bearer tokens at the analyst, as its callers meet it: the real `intraskill analyst serve`
process on loopback (the live registry), admitting one grant per role (ANALYST_TOKENS, the list
the registry holds too).

`ROLES_OF` is the policy written down by hand: no token or an unknown one is a 401 (before the
body is validated), a role the route does not admit a 403, the admitted roles get through;
`/healthz`, `/readyz` and `/metrics` answer without a token. Then the trainer's own client
hands in a group with its token, and an operator reads it back.
"""

from __future__ import annotations

import pytest
from registry_server import TOKENS

from shared.contracts.analyst_api import AnalystClient, AnalystError
from shared.contracts.analyst_api.schemas import AllWrongGroupSubmit
from tests.live_servers import free_port
from tests.service_auth import (
    ANONYMOUS,
    assert_concurrent_callers_each_get_their_roles_answer,
    assert_probes_and_metrics_are_anonymous,
    assert_registry_gone_is_not_ready_and_still_guarded,
    assert_route_admits_only,
    published_policy,
)
from tests.service_servers import analyst_serving as serving

READERS = {"trainer", "operator", "reader"}
ROLES_OF = {
    ("POST", "/v1/all-wrong-groups"): {"trainer"},
    ("GET", "/v1/all-wrong-groups"): READERS,
    ("GET", "/v1/all-wrong-groups/{group_id}"): READERS,
    ("GET", "/v1/funnel"): READERS,
    ("POST", "/v1/compile-jobs"): {"trainer"},
    ("POST", "/v1/cold-start-jobs"): {"operator"},
    ("GET", "/v1/jobs/{job_id}"): READERS,
}


@pytest.fixture(scope="module")
def analyst(registry_url, tmp_path_factory):
    with serving(registry_url, tmp_path_factory.mktemp("analyst-auth")) as url:
        yield url


def test_the_written_policy_is_every_route_the_service_publishes(analyst):
    published, anonymous = published_policy(analyst)
    assert published == ROLES_OF
    assert anonymous == ANONYMOUS


@pytest.mark.parametrize(("method", "route"), sorted(ROLES_OF))
def test_no_token_401_wrong_role_403_right_role_through(analyst, method, route):
    path = route.replace("{group_id}", "group-nope").replace("{job_id}", "job-nope")
    params = {"run_id": "r", "round": 0} if route == "/v1/funnel" else None
    assert_route_admits_only(
        analyst, method, path, ROLES_OF[(method, route)], TOKENS, params=params
    )


def test_probes_and_metrics_answer_without_a_token(analyst):
    assert_probes_and_metrics_are_anonymous(analyst)


def test_callers_above_the_worker_pool_each_get_their_roles_answer(analyst):
    route = ("GET", "/v1/all-wrong-groups")
    assert_concurrent_callers_each_get_their_roles_answer(
        analyst, route[1], ROLES_OF[route], TOKENS
    )


def test_with_its_registry_gone_it_is_not_ready_and_still_guarded(tmp_path):
    with serving(f"http://127.0.0.1:{free_port()}", tmp_path) as url:  # nothing listens there
        assert_registry_gone_is_not_ready_and_still_guarded(
            url, "/v1/all-wrong-groups", "operator", TOKENS
        )


def test_the_trainer_hands_in_a_group_and_an_operator_reads_it(analyst):
    group = AllWrongGroupSubmit(
        run_id="auth-run", round=0, step=1, group_index=0, task_id="task-000001", bank_id=1,
        bank_hash="a" * 64, treatment={"mode": "assisted", "inclusion": [1, 0]}, evidence_id=1,
        checkpoint_id="c", siblings=[{"reward": 0.0, "trajectory_uri": "file:///t/0.json"}] * 2,
    )  # fmt: skip
    with AnalystClient(analyst, token=None, retries=0) as anonymous:
        with pytest.raises(AnalystError) as refused:
            anonymous.submit_all_wrong_group(group)
        assert refused.value.status_code == 401
    with AnalystClient(analyst, token=TOKENS["operator"], retries=0) as operator:
        with pytest.raises(AnalystError) as refused:
            operator.submit_all_wrong_group(group)  # the trainer's work, not an operator's
        assert refused.value.status_code == 403
        with AnalystClient(analyst, token=TOKENS["trainer"], retries=0) as trainer:
            stored = trainer.submit_all_wrong_group(group)
        assert [g.id for g in operator.list_groups(run_id="auth-run")] == [stored.id]
