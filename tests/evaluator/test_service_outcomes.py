"""Gate outcomes the service must report plainly (issue 11): an empty S_0 under each policy, a
run whose recording fails is closed, readiness names what it waits for, and the CLI's refit
says when a folder is missing and never prints bare NaN."""

import dataclasses
import json
import math

import pytest
from fastapi.testclient import TestClient
from gate_service_support import client, make_app, service_client, wait
from registry_server import GRANTS, TOKENS
from test_service_gate_a import TASKS, body, drafts  # noqa: F401  (drafts: a fixture)

from services.evaluator import cli, gate_job
from services.evaluator.app import create_app
from services.evaluator.decision import decide, json_safe
from services.evaluator.design import online_design
from services.evaluator.gate_run import GatePlan, run_gate
from services.evaluator.rollouts import SimulatedRolloutRunner
from services.evaluator.settings import EvaluatorSettings
from services.evaluator.simulation import SimulatedPolicy, uniform_base_rate
from shared.contracts.registry_api.client import NotFound
from shared.contracts.registry_api.schemas import GateStatus
from tests.live_servers import free_port

# Two drafts that each lower success by 0.25 from a 0.55-0.6 base (never clipped at 0): at 600
# tasks each coefficient is more than 4 HC3 errors below 0, so none comes out positive.
HARMFUL = -0.25


def _harmful_app(registry_url, tmp_path, drafts, **kwargs):  # noqa: F811
    app, state, _ = make_app(registry_url, tmp_path, tasks=TASKS, base_rate=(0.55, 0.6), **kwargs)
    state["effects"] = dict.fromkeys(drafts["ids"], HARMFUL)
    return app


def _two_drafts(drafts, **fields) -> dict:  # noqa: F811
    return body(drafts, draft_version_ids=[v.id for v in drafts["versions"][:2]], **fields)


@pytest.mark.parametrize("policy", ["keep", "adopt"])
def test_an_empty_s0_is_an_explicit_outcome_under_either_policy(
    registry_url,
    drafts,  # noqa: F811
    tmp_path,
    policy,
):
    app = _harmful_app(registry_url, tmp_path, drafts)
    with service_client(app) as http:
        request = _two_drafts(drafts, n_tasks=600, empty_bank=policy)
        answer = http.post("/v1/gate-a-jobs", json=request)
        job = wait(http, answer.headers["location"])
    assert job["status"] == "succeeded", job["error"]
    decision, recorded = job["result"]["decision"], job["result"]["registry"]
    assert job["result"]["status"] == "complete"
    assert all(beta <= 0 for beta in decision["coefficients"].values())
    assert decision["selected"] == []
    assert recorded["empty_selection"] is True
    assert (
        "S_0 is empty" in recorded["alias_note"]
        and f"empty_bank={policy}" in recorded["alias_note"]
    )
    registry = client(registry_url, "reader")
    run = registry.get_gate_run(recorded["gate_run_id"])
    assert run.status == GateStatus.complete  # the decision itself is stored either way
    if policy == "keep":
        assert recorded["bank_id"] is None and recorded["alias_moved"] is False
        with pytest.raises(NotFound):
            registry.get_alias(drafts["alias"])
    else:
        bank = registry.get_bank_by_alias(drafts["alias"])
        assert bank.id == recorded["bank_id"] and bank.entries == []
    registry.close()


def test_the_default_policy_keeps_the_alias(registry_url, drafts, tmp_path):  # noqa: F811
    assert EvaluatorSettings(registry_url=registry_url).empty_bank == "keep"


def test_a_run_whose_recording_fails_is_closed_as_failed(
    registry_url,
    drafts,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    opened = {}

    def failing_record_gate(client_, gate, run, outcome, **kwargs):
        opened["run"] = run.id
        raise RuntimeError("recording broke")

    monkeypatch.setattr(gate_job, "record_gate", failing_record_gate)
    app = _harmful_app(registry_url, tmp_path, drafts)
    with service_client(app) as http:
        answer = http.post("/v1/gate-a-jobs", json=_two_drafts(drafts, n_tasks=100))
        job = wait(http, answer.headers["location"])
    assert job["status"] == "failed" and "recording broke" in job["error"]
    registry = client(registry_url, "reader")
    run = registry.get_gate_run(opened["run"])
    assert run.status == GateStatus.failed and "recording broke" in (run.note or "")
    registry.close()


def test_readyz_checks_the_registry_token_and_jobs_folder(registry_url, tmp_path):
    ready = EvaluatorSettings(
        registry_url=registry_url,
        registry_token=TOKENS["evaluator"],
        tokens=GRANTS,
        jobs_dir=tmp_path / "jobs",
    )
    with TestClient(create_app(ready, task_source=lambda split: [])) as http:
        answer = http.get("/readyz")
        assert answer.status_code == 200, answer.text
        assert answer.json()["checks"] == {
            "registry": "ok",
            "registry_token": "ok",
            "tokens": "ok",
            "jobs_dir": "ok",
        }
    down = ready.model_copy(
        update={
            "registry_url": f"http://127.0.0.1:{free_port()}",
            "registry_token": None,
            "tokens": [],
        }
    )
    with TestClient(create_app(down, task_source=lambda split: [])) as http:
        answer = http.get("/readyz")
        assert http.get("/healthz").status_code == 200  # alive, just not ready
    assert answer.status_code == 503 and answer.headers["retry-after"].isdigit()
    checks = answer.json()["checks"]
    assert checks["registry"].startswith("unreachable") and checks["jobs_dir"] == "ok"
    assert "EVALUATOR_REGISTRY_TOKEN" in checks["registry_token"]
    assert "EVALUATOR_TOKENS" in checks["tokens"]  # it would refuse every caller


def test_refit_of_a_missing_folder_says_the_folder_is_missing(tmp_path, capsys):
    missing = tmp_path / "no-such-gate"
    assert cli.main(["refit", str(missing)]) == 1
    error = capsys.readouterr().err
    assert f"folder {missing} does not exist" in error
    (tmp_path / "a-file").write_text("x")
    assert cli.main(["refit", str(tmp_path / "a-file")]) == 1
    assert "is not a folder" in capsys.readouterr().err


def test_json_output_has_no_bare_nan():
    design = online_design(["c1", "c2"], adds=["a1"])
    tasks = tuple(f"task-{i:06d}" for i in range(60))
    policy = SimulatedPolicy({"c1": 0.1, "c2": 0.0, "a1": 0.05}, uniform_base_rate(0.3, 0.6))
    runner = SimulatedRolloutRunner(policy, _identity())
    observations = run_gate(GatePlan(design, tasks), runner).pairing.observations
    decision = decide(design, observations)
    primary = decision.fit.components["r_strict"]
    nan_se = dataclasses.replace(primary, hc3_se=(math.nan, math.inf, 0.1))
    broken = dataclasses.replace(
        decision, fit=dataclasses.replace(decision.fit, components={"r_strict": nan_se})
    )
    text = json.dumps(broken.as_json(intervals=True), allow_nan=False)  # raises on NaN
    errors = json.loads(text)["intervals"]["r_strict"]["hc3_se"]
    assert errors == {"c1": None, "c2": None, "a1": 0.1}
    assert json_safe({"a": [1.0, math.nan], "b": (math.inf,)}) == {"a": [1.0, None], "b": [None]}


def _identity():
    from gate_service_support import simulated_identity

    return simulated_identity("ckpt-json", "val")
