"""The gate service end to end: HTTP jobs, simulated rollouts (test double), a live registry."""

import functools
import itertools
import uuid

import pytest
from gate_service_support import (
    card_body,
    client,
    content,
    service_client,
    simulated_identity,
    wait,
)
from gate_service_support import make_app as make_service_app
from registry_server import TOKENS

from services.evaluator import cli
from services.evaluator.gate_job import RECORDS_FILE, read_records
from services.evaluator.pairing import bare_plan_fingerprint, records_fingerprint
from shared.contracts.evaluator_api.schemas import DESIGN_NOT_IDENTIFIED
from shared.contracts.registry_api.schemas import GateStatus

TASKS = [f"task-{i:06d}" for i in range(480)]
ROUNDS = itertools.count(100)
make_app = functools.partial(make_service_app, tasks=TASKS)


@pytest.fixture
def world(registry_url):
    """A frozen bank of four chunks behind a fresh alias, one ADD and one REWRITE candidate."""
    tag = uuid.uuid4().hex[:6]
    round_number = next(ROUNDS)
    analyst, evaluator, trainer = (
        client(registry_url, r) for r in ("analyst", "evaluator", "trainer")
    )
    checkpoint = f"ckpt-{tag}"
    trainer.create_checkpoint(checkpoint, uri=f"file:///weights/{tag}", step=20, round=round_number)
    chunks = {
        name: analyst.create_chunk(f"{name}-{tag}", content(f"{name}-{tag}"))
        for name in ("c1", "c2", "c3", "c4")
    }
    bank = evaluator.create_bank(
        [
            {"chunk_version_id": c.latest.id, "rho": 0.5, "coefficient": 0.01}
            for c in chunks.values()
        ],
        round=round_number,
    )
    evaluator.freeze_bank(bank.id)
    alias = f"cur-{tag}"
    evaluator.create_alias(alias, bank.id, reason="test setup")
    # one card per candidate: the registry lets a card back one candidate per round
    cards = [analyst.create_card(card_body(round_number)) for _ in range(2)]
    add = analyst.create_candidate(
        {"round": round_number, "operation": "ADD", "slug": f"n1-{tag}",
         "content": content(f"n1-{tag}"), "source_card_ids": [cards[0].id]}
    )  # fmt: skip
    rewrite = analyst.create_candidate(
        {"round": round_number, "operation": "REWRITE", "target_chunk_id": chunks["c1"].id,
         "content": content(f"c1-rewrite-{tag}"), "source_card_ids": [cards[1].id]}
    )  # fmt: skip
    ids = {
        "c1": f"c1-{tag}@1", "c1_new": f"c1-{tag}@{rewrite.version}", "c2": f"c2-{tag}@1",
        "c3": f"c3-{tag}@1", "c4": f"c4-{tag}@1", "n1": f"n1-{tag}@1",
    }  # fmt: skip
    yield {
        "tag": tag, "round": round_number, "checkpoint": checkpoint, "bank": bank, "alias": alias,
        "ids": ids, "chunks": chunks, "add": add, "rewrite": rewrite,
    }  # fmt: skip
    for c in (analyst, evaluator, trainer):
        c.close()


def effects(ids):
    # effects far from 0 (HC3 SE ~0.05-0.065 at 480 tasks): the decision below holds whatever
    # slugs (and so masks) a run draws (0 misses in 400 draws). At 240 tasks (SE ~0.085, and
    # clipping at 1 shrinks c2's additive effect) c2 came out non-positive in ~1% of draws.
    return {
        ids["c1"]: -0.1, ids["c1_new"]: 0.25, ids["c2"]: 0.2, ids["c3"]: -0.25,
        ids["c4"]: -0.2, ids["n1"]: 0.3,
    }  # fmt: skip


def test_complete_gate_records_everything_and_moves_the_alias(
    registry_url, world, tmp_path, capsys
):
    app, state, _ = make_app(registry_url, tmp_path)
    state["effects"] = effects(world["ids"])
    ids = world["ids"]
    with service_client(app) as http:
        answer = http.post(
            "/v1/gate-jobs",
            json={
                "round": world["round"],
                "checkpoint_id": world["checkpoint"],
                "alias": world["alias"],
            },
        )
        assert answer.status_code == 202, answer.text
        assert answer.headers["location"] == f"/v1/gate-jobs/{answer.json()['id']}"
        job = wait(http, answer.headers["location"])
        assert job["status"] == "succeeded", job["error"]
        result = job["result"]
        assert state["uri"] == f"file:///weights/{world['tag']}"
        assert result["status"] == "complete" and result["paired"] == len(TASKS)
        decision = result["decision"]
        # the rewrite wins its family, the harmful chunks go, the ADD is admitted
        assert decision["selected"] == [ids["c1_new"], ids["c2"], ids["n1"]]
        assert decision["status"][ids["c1"]] == "rewrite_loser"
        assert decision["status"][ids["c3"]] == "retired"
        recorded = result["registry"]
        assert recorded["alias_moved"] is True

        registry = client(registry_url)
        run = registry.get_gate_run(recorded["gate_run_id"])
        assert run.status == GateStatus.complete and run.n_observations == len(TASKS)
        assert run.mask_seed == 20260901 and run.checkpoint_id == world["checkpoint"]
        # the gate's design and identity are typed fields of the run, not a note
        assert (run.kind, run.split, run.sample_id) == ("online", "val", 0)
        assert (run.budget, run.solver, run.n_tasks) == (10, "statsmodels", len(TASKS))
        assert run.base_bank_id == world["bank"].id and run.note is None
        assert run.identity.model_dump() == {
            "model": "simulated-policy", "decoding": "dec", "prompt_version": "layout",
            "prompt_fingerprint": "fp", "env_version": "shopsim-test",
            "action_protocol": "tools-v3",
        }  # fmt: skip
        assert run.bare_baseline.source == "fresh" and run.bare_baseline.records_sha256 is None
        assert run.bare_baseline.plan_sha256 == bare_plan_fingerprint(
            simulated_identity(world["checkpoint"], "val"), TASKS, 0
        )
        stored = registry.get_gate_decision(run.id)
        assert stored.provisional is False
        rows = {f"{row.slug}@{row.version}": row for row in stored.rows}
        assert rows[ids["n1"]].coefficients["r_strict"] == pytest.approx(
            decision["coefficients"][ids["n1"]], abs=1e-12
        )
        assert set(rows[ids["n1"]].coefficients) == {
            "r_strict", "r_success", "r_type", "r_att", "r_option", "r_price", "r_loose"
        }  # fmt: skip
        assert rows[ids["n1"]].hc3_se["r_strict"] > 0
        new_bank = registry.get_bank_by_alias(world["alias"])
        assert new_bank.id == recorded["bank_id"] and new_bank.content_hash is not None
        assert new_bank.parent_bank_id == world["bank"].id and new_bank.round == world["round"] + 1
        assert [(e.slug, e.version) for e in new_bank.entries] == [
            (f"c1-{world['tag']}", world["rewrite"].version),  # keeps c1's logical slot
            (f"c2-{world['tag']}", 1),
            (f"n1-{world['tag']}", 1),
        ]
        assert max(e.rho for e in new_bank.entries) == pytest.approx(0.9)
        assert [e.rho for e in new_bank.entries] == pytest.approx(
            [decision["next_rho"][vid] for vid in decision["selected"]]
        )

        # the stored gate re-fits to the same decision: over HTTP and with the CLI
        refit = http.post("/v1/refits", json={"gate_run_id": run.id}).json()
        assert refit["selected"] == decision["selected"]
        assert refit["coefficients"] == pytest.approx(decision["coefficients"], abs=1e-12)
        registry.close()
    import os

    os.environ["EVALUATOR_REGISTRY_URL"] = registry_url
    os.environ["EVALUATOR_REGISTRY_TOKEN"] = TOKENS["reader"]
    try:
        assert cli.main(["refit", str(run.id), "--json"]) == 0
    finally:
        del os.environ["EVALUATOR_REGISTRY_URL"], os.environ["EVALUATOR_REGISTRY_TOKEN"]
    import json

    assert json.loads(capsys.readouterr().out)["selected"] == decision["selected"]


def test_incomplete_gate_stores_a_provisional_fit_and_adopts_nothing(registry_url, world, tmp_path):
    broken = {TASKS[3], TASKS[7]}
    app, state, _ = make_app(
        registry_url, tmp_path, fail=lambda r: r.task_id in broken and r.arm == "bare"
    )
    state["effects"] = effects(world["ids"])
    with service_client(app) as http:
        answer = http.post(
            "/v1/gate-jobs",
            json={
                "round": world["round"],
                "checkpoint_id": world["checkpoint"],
                "alias": world["alias"],
                "max_retries": 1,
            },
        )
        job = wait(http, answer.headers["location"])
    result = job["result"]
    assert job["status"] == "succeeded" and result["status"] == "incomplete"
    assert sorted(u["task_id"] for u in result["unpaired"]) == sorted(broken)
    assert result["failed_attempts"] == 4  # two tasks, first try and one retry each
    recorded = result["registry"]
    assert recorded["provisional"] is True and recorded["bank_id"] is None
    registry = client(registry_url)
    run = registry.get_gate_run(recorded["gate_run_id"])
    assert run.status == GateStatus.incomplete and run.decision_id == recorded["decision_id"]
    assert run.n_observations == len(TASKS) - 2 and run.n_tasks == len(TASKS)
    # the provisional fit is in the registry, not only in the job folder
    stored = registry.get_gate_decision(run.id)
    assert stored.provisional is True and stored.n_observations == len(TASKS) - 2
    assert TASKS[3] in stored.note and TASKS[7] in stored.note
    rows = {f"{row.slug}@{row.version}": row for row in stored.rows}
    ids = world["ids"]
    assert rows[ids["n1"]].coefficients["r_strict"] == pytest.approx(
        result["decision"]["coefficients"][ids["n1"]], abs=1e-12
    )
    assert {vid: row.status for vid, row in rows.items()} == result["decision"]["status"]
    assert registry.get_alias(world["alias"]).bank_id == world["bank"].id  # not moved
    assert registry.list_banks(parent_bank_id=world["bank"].id).total == 0  # no S_{t+1}
    assert registry.get_candidate(world["add"].id).status == "proposed"  # not settled
    registry.close()


def test_alias_moved_meanwhile_is_not_overwritten(registry_url, world, tmp_path):
    operator = client(registry_url, "operator")
    other = operator.create_bank([], round=world["round"])
    operator.freeze_bank(other.id)

    def move_meanwhile():
        alias = operator.get_alias(world["alias"])
        operator.move_alias(world["alias"], other.id, reason="operator", if_match=alias.etag)

    app, state, _ = make_app(registry_url, tmp_path, on_runner=move_meanwhile)
    state["effects"] = effects(world["ids"])
    with service_client(app) as http:
        answer = http.post(
            "/v1/gate-jobs",
            json={
                "round": world["round"],
                "checkpoint_id": world["checkpoint"],
                "alias": world["alias"],
            },
        )
        job = wait(http, answer.headers["location"])
    recorded = job["result"]["registry"]
    assert job["result"]["status"] == "complete" and recorded["bank_id"] is not None
    assert (
        recorded["alias_moved"] is False
        and "moved since the gate started" in recorded["alias_note"]
    )
    assert operator.get_alias(world["alias"]).bank_id == other.id
    operator.close()


def test_a_backend_serving_another_checkpoint_is_refused_before_any_gate_run(
    registry_url, world, tmp_path
):
    app, state, _ = make_app(registry_url, tmp_path, checkpoint_override="some-other-ckpt")
    state["effects"] = effects(world["ids"])
    with service_client(app) as http:
        answer = http.post(
            "/v1/gate-jobs",
            json={
                "round": world["round"],
                "checkpoint_id": world["checkpoint"],
                "alias": world["alias"],
            },
        )
        job = wait(http, answer.headers["location"])
    assert job["status"] == "failed"
    assert "checkpoint_id differs" in job["error"]
    registry = client(registry_url)
    assert registry.list_gate_runs(checkpoint_id=world["checkpoint"]) == []
    registry.close()


def test_bare_reuse_and_a_gates_own_k_and_solver_are_recorded_and_refit(
    registry_url, world, tmp_path
):
    app, state, _ = make_app(registry_url, tmp_path)
    state["effects"] = effects(world["ids"])
    body = {"round": world["round"], "checkpoint_id": world["checkpoint"], "alias": world["alias"],
            "move_alias": False, "budget": 1, "solver": "reference"}  # fmt: skip
    with service_client(app) as http:
        first = wait(http, http.post("/v1/gate-jobs", json=body).headers["location"])
        second = http.post("/v1/gate-jobs", json={**body, "bare_from_job": first["id"]})
        job = wait(http, second.headers["location"])
        assert job["status"] == "succeeded" and job["result"]["status"] == "complete"
        assert job["result"]["rollouts"] == 2 * len(TASKS)  # the reused bare ones count too
        assert job["result"]["registry"]["alias_note"] == "alias not moved (move_alias off)"
        decision = first["result"]["decision"]
        assert len(decision["selected"]) == 1  # K = 1
        # a refit of the stored run uses its own K and solver: the same decision, bit for bit
        run_id = first["result"]["registry"]["gate_run_id"]
        refit = http.post("/v1/refits", json={"gate_run_id": run_id}).json()
        assert refit["selected"] == decision["selected"]
        assert refit["coefficients"] == decision["coefficients"]
        wider = http.post("/v1/refits", json={"gate_run_id": run_id, "budget": 10}).json()
        assert len(wider["selected"]) == 3
    registry = client(registry_url)
    stored = registry.get_gate_run(run_id)
    assert (stored.budget, stored.solver) == (1, "reference")
    reusing = registry.get_gate_run(job["result"]["registry"]["gate_run_id"])
    bare = [r for r in read_records(tmp_path / "jobs" / first["id"] / RECORDS_FILE)
            if r.arm == "bare"]  # fmt: skip
    assert reusing.bare_baseline.source == f"job:{first['id']}"
    assert reusing.bare_baseline.records_sha256 == records_fingerprint(bare)
    # same identity and tasks: both gates name the same bare plan
    assert reusing.bare_baseline.plan_sha256 == stored.bare_baseline.plan_sha256
    registry.close()


def test_bad_requests_are_4xx_naming_the_field(registry_url, world, tmp_path):
    app, state, _ = make_app(registry_url, tmp_path)
    state["effects"] = effects(world["ids"])
    base = {"round": world["round"], "checkpoint_id": world["checkpoint"], "alias": world["alias"]}
    with service_client(app) as http:
        small = http.post("/v1/gate-jobs", json={**base, "n_tasks": 5})
        assert small.status_code == 422
        assert "rank deficient: change the mask seed or add tasks" in small.text
        # a design the masks cannot identify is a kind of its own: the trainer redraws for it
        assert small.json()["detail"][0]["type"] == DESIGN_NOT_IDENTIFIED
        unknown = http.post("/v1/gate-jobs", json={**base, "task_ids": ["task-999999"]})
        assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == [
            "body",
            "task_ids",
        ]
        assert unknown.json()["detail"][0]["type"] != DESIGN_NOT_IDENTIFIED
        missing_alias = http.post("/v1/gate-jobs", json={**base, "alias": "no-such-alias"})
        assert missing_alias.status_code == 422 and "no-such-alias" in missing_alias.text
        extra = http.post("/v1/gate-jobs", json={**base, "colour": "red"})
        assert extra.status_code == 422 and extra.json()["detail"][0]["loc"] == ["body", "colour"]
        reuse = http.post("/v1/gate-jobs", json={**base, "bare_from_job": "gate-nope"})
        assert reuse.status_code == 422 and reuse.json()["detail"][0]["loc"] == [
            "body",
            "bare_from_job",
        ]
        assert http.get("/v1/gate-jobs/gate-unknown").status_code == 404
        assert http.post("/v1/refits", json={"gate_run_id": 987654}).status_code == 404
        assert http.get("/v1/gate-jobs").json() == []


def test_evaluation_job_over_http(registry_url, world, tmp_path):
    trainer = client(registry_url, "trainer")
    trained = f"trained-{world['tag']}"
    trainer.create_checkpoint(trained, uri="file:///weights/trained", step=80, round=3)
    trainer.close()
    app, state, _ = make_app(registry_url, tmp_path)
    bank_ids = [f"{slug}@1" for slug in (f"c{i}-{world['tag']}" for i in range(1, 5))]
    state["effects"] = dict.fromkeys(bank_ids, 0.02)
    body = {
        "conditions": [
            {"name": "base/bare", "checkpoint_id": world["checkpoint"]},
            {"name": "base/S0", "checkpoint_id": world["checkpoint"], "bank_id": world["bank"].id},
            {"name": "trained/bare", "checkpoint_id": trained},
            {"name": "trained/S_T", "checkpoint_id": trained, "bank_alias": world["alias"]},
        ],
        "split": "test",
        "n_tasks": 120,
        "resamples": 1000,
    }
    with service_client(app) as http:
        answer = http.post("/v1/eval-jobs", json=body)
        assert answer.status_code == 202, answer.text
        job = wait(http, answer.headers["location"])
        assert job["status"] == "succeeded", job["error"]
        report = job["result"]
        assert report["n_tasks"] == 120 and len(report["comparisons"]) == 4
        assert report["conditions"]["trained/S_T"]["chunks"] == bank_ids
        assert report["conditions"]["base/S0"]["bank_id"] == world["bank"].id
        folder = tmp_path / "jobs" / job["id"]
        assert {"plan.json", "records.jsonl", "evaluation.json", "evaluation.png"} <= {
            p.name for p in folder.iterdir()
        }
        bad = http.post("/v1/eval-jobs", json={**body, "comparisons": [["base/bare", "nope"]]})
        assert bad.status_code == 422 and "nope" in bad.text
        unknown = http.post(
            "/v1/eval-jobs",
            json={**body, "conditions": [{"name": "x", "checkpoint_id": "no-such-ckpt"}]},
        )
        assert unknown.status_code == 422 and "no-such-ckpt" in unknown.text
