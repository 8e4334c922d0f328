"""The analyst service's HTTP contract through its own client (shared/contracts/analyst_api), over a
real local server: idempotent group submission, 409 on a changed body, job polling, funnel,
health and readiness."""

import threading
import time

import pytest
import uvicorn

from services.analyst.app import create_app
from services.analyst.settings import AnalystSettings
from shared.contracts.analyst_api import AnalystClient, AnalystError
from shared.contracts.analyst_api.schemas import AllWrongGroupSubmit, CompileRoundCreate
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import TokenGrant, hash_token
from tests.live_servers import free_port

TRAINER_TOKEN = "analyst-api-test-trainer"


@pytest.fixture(scope="module")
def analyst(tmp_path_factory):
    """The app on a loopback port, called as the trainer calls it; the registry URL points at
    nothing (not ready)."""
    dead = f"http://127.0.0.1:{free_port()}"
    grant = TokenGrant(name="trainer", role=Role.trainer, token_sha256=hash_token(TRAINER_TOKEN))
    settings = AnalystSettings(
        registry_url=dead,
        registry_token="t",
        tokens=[grant],
        data_dir=tmp_path_factory.mktemp("analyst"),
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    client = AnalystClient(f"http://127.0.0.1:{port}", token=TRAINER_TOKEN, retries=1, backoff=0.05)
    deadline = time.monotonic() + 30
    while not client.healthz():
        assert time.monotonic() < deadline, "analyst did not start"
        time.sleep(0.1)
    yield client
    client.close()
    server.should_exit = True
    thread.join(timeout=10)


def group(**changes) -> AllWrongGroupSubmit:
    body = {
        "run_id": "run-a",
        "round": 0,
        "step": 3,
        "group_index": 5,
        "task_id": "task-000007",
        "bank_id": 1,
        "bank_hash": "a" * 64,
        "treatment": {"mode": "assisted", "inclusion": [1, 0]},
        "siblings": [{"reward": 0.25, "trajectory_uri": "file:///t/0.json"}] * 8,
        "evidence_id": 11,
        "checkpoint_id": "ckpt-3",
    }
    return AllWrongGroupSubmit.model_validate({**body, **changes})


def test_group_submission_is_idempotent(analyst):
    first = analyst.submit_all_wrong_group(group())
    again = analyst.submit_all_wrong_group(group())
    assert first.status == "pending" and not first.replayed
    assert again.replayed and again.id == first.id
    assert analyst.get_group(first.id).request == group()
    with pytest.raises(AnalystError) as conflict:
        analyst.submit_all_wrong_group(group(task_id="task-000008"))
    assert conflict.value.status_code == 409
    other = analyst.submit_all_wrong_group(group(group_index=6))
    assert other.id != first.id
    listed = analyst.list_groups(run_id="run-a", round=0)
    assert [g.request.group_index for g in listed] == [5, 6]


def test_bad_group_is_a_422_naming_the_field(analyst):
    with pytest.raises(AnalystError) as bad:
        analyst.request("POST", "/v1/all-wrong-groups", json={**group().model_dump(), "step": -1})
    assert bad.value.status_code == 422
    assert bad.value.detail[0]["loc"][-1] == "step"


def test_funnel_counts_groups_before_a_compile(analyst):
    analyst.submit_all_wrong_group(group(run_id="run-f", step=1))
    analyst.submit_all_wrong_group(group(run_id="run-f", step=2))
    funnel = analyst.funnel("run-f", 0)
    assert (funnel.all_wrong_groups, funnel.retries, funnel.candidates) == (2, 0, 0)


def test_readiness_reports_an_unreachable_registry(analyst):
    readiness = analyst.readyz()
    assert not readiness.ready
    assert readiness.checks["registry"].startswith("unreachable")
    assert readiness.checks["data_dir"] == "ok"
    with pytest.raises(TimeoutError):
        analyst.wait_ready(timeout=0.3, poll=0.1)


def test_a_compile_while_the_registry_is_down_is_refused_at_submit(analyst):
    """Its checkpoint and bank cannot be checked: a 503 saying when to retry, no job that can
    only fail (issue 34, item 9)."""
    body = CompileRoundCreate(
        run_id="run-a", round=0, bank_id=1, policy={"checkpoint_id": "c", "backend": "procedural"}
    )
    with pytest.raises(AnalystError) as refused:
        analyst.compile_round(body, idempotency_key="k-1")
    assert refused.value.status_code == 503
    with pytest.raises(AnalystError) as missing:
        analyst.get_job("compile-nope")
    assert missing.value.status_code == 404
