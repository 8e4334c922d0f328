"""Gate runs carry their design and rollout identity; incomplete gates keep a provisional fit that
nothing may adopt; Gate A runs over cold-start drafts that are in no bank."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
import sqlalchemy as sa
from registry_support import ADMIN_URL, GATE_IDENTITY, chunk_content, gate_protocol

from services.registry.migrate import upgrade
from shared.contracts.registry_api.schemas import REWARD_COMPONENTS, Role


def rewards(strict: float) -> dict[str, float]:
    return dict.fromkeys(REWARD_COMPONENTS, strict)


def observation(index: int, inclusion: list[int], **extra) -> dict:
    return {
        "task_id": f"val-{index}",
        "inclusion": inclusion,
        "bare": rewards(0.0),
        "masked": rewards(float(index % 2)),
        **extra,
    }


@pytest.fixture
def online(api):
    """A frozen bank of one chunk, a checkpoint, `current`, and an ADD candidate."""
    current = api.chunk("price-check")["latest"]["id"]
    bank = api.bank([current])
    api.checkpoint("ckpt-r0")
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": bank["id"], "reason": "S0"},
        expect=201,
    )
    deployable = {
        "failure_mechanism": "m",
        "applicable_when": "w",
        "observable_trigger": "t",
        "corrective_procedure": "p",
        "verification_step": "v",
    }
    card = api.json(
        "POST",
        "/v1/cards",
        role=Role.analyst,
        expect=201,
        json={
            "round": 0,
            "task_id": "task-000001",
            "outcome": "ADD",
            "eligible": True,
            "deployable": deployable,
        },
    )
    add = api.json(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=201,
        json={
            "round": 0,
            "operation": "ADD",
            "content": chunk_content("budget"),
            "source_card_ids": [card["id"]],
        },
    )
    added = {"chunk_version_id": add["chunk_version_id"], "kind": "add", "slot": 1}
    columns = [
        {"chunk_version_id": current, "kind": "current", "slot": 0},
        {**added, "candidate_id": add["id"]},
    ]
    return {"bank": bank, "alias": alias, "current": current, "add": add, "columns": columns}


def open_online(api, online, n_tasks: int, **fields) -> dict:
    body = {
        "round": 0,
        "checkpoint_id": "ckpt-r0",
        "base_bank_id": online["bank"]["id"],
        "candidate_pool": {"columns": online["columns"]},
        "mask_seed": 20260901,
        **gate_protocol(n_tasks),
        **fields,
    }
    return api.json("POST", "/v1/gates", role=Role.evaluator, json=body, expect=201)


def test_a_gate_run_records_its_design_and_rollout_identity(api, online):
    baseline = {"source": "job:gate-0123", "plan_sha256": "cd" * 32, "records_sha256": "ef" * 32}
    run = open_online(
        api, online, 4, split="val", sample_id=0, budget=7, solver="reference",
        bare_baseline=baseline,
    )  # fmt: skip
    stored = api.json("GET", f"/v1/gates/{run['id']}", role=Role.reader)
    assert stored == run
    assert (stored["kind"], stored["split"], stored["sample_id"]) == ("online", "val", 0)
    assert (stored["budget"], stored["solver"], stored["n_tasks"]) == (7, "reference", 4)
    assert stored["identity"] == GATE_IDENTITY and stored["bare_baseline"] == baseline
    listed = api.json("GET", "/v1/gates", role=Role.reader, params={"kind": "online"})
    assert [r["id"] for r in listed["items"]] == [run["id"]]
    assert api.json("GET", "/v1/gates", role=Role.reader, params={"kind": "gate_a"})["total"] == 0

    body = {
        "round": 0,
        "checkpoint_id": "ckpt-r0",
        "base_bank_id": online["bank"]["id"],
        "candidate_pool": {"columns": online["columns"]},
        "mask_seed": 1,
        **gate_protocol(4),
    }
    for broken, loc in [
        ({k: v for k, v in body.items() if k != "identity"}, ["body", "identity"]),
        ({**body, "identity": {**GATE_IDENTITY, "model": ""}}, ["body", "identity", "model"]),
        ({**body, "bare_baseline": {"source": "fresh", "plan_sha256": "x"}},
         ["body", "bare_baseline", "plan_sha256"]),
        ({**body, "solver": "numpy"}, ["body", "solver"]),
        ({**body, "budget": 0}, ["body", "budget"]),
        ({**body, "kind": "gate_b"}, ["body", "kind"]),
        ({k: v for k, v in body.items() if k != "base_bank_id"}, ["body", "base_bank_id"]),
    ]:  # fmt: skip
        response = api.call("POST", "/v1/gates", role=Role.evaluator, json=broken, expect=422)
        assert response.json()["detail"][0]["loc"] == loc, (loc, response.json())

    wrong_sample = api.call(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [observation(0, [1, 0], sample_id=1)]},
        expect=422,
    )
    assert wrong_sample.json()["detail"][0]["loc"] == ["body", "observations", 0, "sample_id"]
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [observation(i, [i % 2, 1]) for i in range(3)]},
        expect=201,
    )
    too_many = api.call(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [observation(i, [1, 1]) for i in range(3, 5)]},
        expect=409,
    )
    assert "planned 4 tasks" in too_many.json()["detail"]


def test_an_incomplete_gate_keeps_a_provisional_fit_that_nothing_may_adopt(api, online):
    run = open_online(api, online, 3)
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [observation(0, [1, 0]), observation(1, [0, 1])]},
        expect=201,
    )
    rows = [
        {"chunk_version_id": online["current"], "coefficients": {"r_strict": -0.1},
         "status": "retired"},
        {"chunk_version_id": online["add"]["chunk_version_id"], "coefficients": {"r_strict": 0.2},
         "rank": 1, "status": "selected"},
    ]  # fmt: skip
    final = api.call(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=409,
    )
    assert "2 of its 3 tasks" in final.json()["detail"]
    note = "1 task(s) unpaired: val-2"
    decision = api.json(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows, "provisional": True, "note": note},
        expect=201,
    )
    assert decision["provisional"] is True and decision["note"] == note
    assert decision["n_observations"] == 2
    closed = api.json("GET", f"/v1/gates/{run['id']}", role=Role.reader)
    assert closed["status"] == "incomplete" and closed["decision_id"] == decision["id"]
    assert api.json("GET", f"/v1/gates/{run['id']}/decision", role=Role.reader) == decision
    # the candidate waits for a gate that completes
    candidate = api.json("GET", f"/v1/candidates/{online['add']['id']}", role=Role.reader)
    assert candidate["status"] == "proposed" and candidate["decision_id"] is None

    # nothing may cite it: no bank, no alias move, no alias
    entries = [{"chunk_version_id": online["add"]["chunk_version_id"], "rho": 0.9}]
    cited = {"entries": entries, "round": 1, "gate_decision_id": decision["id"]}
    refused = api.call("POST", "/v1/banks", role=Role.evaluator, json=cited, expect=422)
    assert refused.json()["detail"][0]["loc"] == ["body", "gate_decision_id"]
    assert "provisional" in refused.json()["detail"][0]["msg"]
    draft = api.json(
        "POST", "/v1/banks", role=Role.evaluator, json={"entries": entries}, expect=201
    )
    api.call(
        "PATCH",
        f"/v1/banks/{draft['id']}",
        role=Role.evaluator,
        json={"gate_decision_id": decision["id"]},
        expect=422,
    )
    api.json("POST", f"/v1/banks/{draft['id']}/freeze", role=Role.evaluator)
    move = {"bank_id": draft["id"], "reason": "adopt", "gate_decision_id": decision["id"]}
    api.call(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        headers={"If-Match": online["alias"]["etag"]},
        json=move,
        expect=422,
    )
    api.call("POST", "/v1/aliases", role=Role.evaluator, json={**move, "name": "trial"}, expect=422)
    current = api.json("GET", "/v1/aliases/current", role=Role.reader)
    assert current["bank_id"] == online["bank"]["id"]
    # and the gate is closed: no second decision, no more observations, no re-close
    for method, path, body in [
        ("POST", f"/v1/gates/{run['id']}/decision", {"rows": rows}),
        ("POST", f"/v1/gates/{run['id']}/observations", {"observations": [observation(2, [1, 1])]}),
        ("PATCH", f"/v1/gates/{run['id']}", {"status": "failed"}),
    ]:  # fmt: skip
        api.call(method, path, role=Role.evaluator, json=body, expect=409)
    audit = api.json(
        "GET", "/v1/audit", role=Role.reader, params={"action": "gate_decision.create"}
    )["items"]
    assert audit[-1]["after"]["provisional"] is True


@pytest.fixture
def drafts(api):
    """Four cold-start draft chunks (analyst), in no bank, and the base checkpoint."""
    api.checkpoint("ckpt-base")
    return [
        api.json(
            "POST",
            "/v1/chunks",
            role=Role.analyst,
            expect=201,
            json={"slug": f"draft-{i}", "content": chunk_content(f"d{i}"), "source": "cold_start"},
        )["latest"]["id"]
        for i in range(4)
    ]


def gate_a_body(version_ids: list[int], **fields) -> dict:
    columns = [
        {"chunk_version_id": vid, "kind": "draft", "slot": slot}
        for slot, vid in enumerate(version_ids)
    ]
    return {
        "kind": "gate_a",
        "round": 0,
        "checkpoint_id": "ckpt-base",
        "candidate_pool": {"columns": columns},
        "mask_seed": 20260901,
        "budget": 2,
        **gate_protocol(6),
        **fields,
    }


def test_gate_a_runs_over_cold_start_drafts_and_its_decision_makes_s0(api, drafts):
    operator_chunk = api.chunk("operator-written")["latest"]["id"]
    bank = api.bank([operator_chunk])
    bad = [
        ({"base_bank_id": bank["id"]}, ["body", "base_bank_id"]),
        ({"kind": "online"}, ["body", "base_bank_id"]),
        ({"kind": "online", "base_bank_id": bank["id"]},
         ["body", "candidate_pool", "columns", 0, "kind"]),
    ]  # fmt: skip
    for fields, loc in bad:
        response = api.call(
            "POST", "/v1/gates", role=Role.evaluator, json=gate_a_body(drafts, **fields), expect=422
        )
        assert response.json()["detail"][0]["loc"] == loc, (fields, response.json())
    not_draft = gate_a_body(drafts)
    not_draft["candidate_pool"]["columns"][1]["kind"] = "add"
    response = api.call("POST", "/v1/gates", role=Role.evaluator, json=not_draft, expect=422)
    assert response.json()["detail"][0]["loc"] == ["body", "candidate_pool", "columns", 1, "kind"]
    response = api.call(
        "POST",
        "/v1/gates",
        role=Role.evaluator,
        json=gate_a_body([*drafts, operator_chunk]),
        expect=422,
    )
    assert response.json()["detail"][0]["loc"] == [
        "body", "candidate_pool", "columns", 4, "chunk_version_id"
    ]  # fmt: skip
    assert "cold_start" in response.json()["detail"][0]["msg"]

    run = api.json("POST", "/v1/gates", role=Role.evaluator, json=gate_a_body(drafts), expect=201)
    assert run["kind"] == "gate_a" and run["base_bank_id"] is None and run["budget"] == 2
    masks = [[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 0]]
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [observation(i, m) for i, m in enumerate(masks)]},
        expect=201,
    )
    betas = [0.3, 0.15, 0.2, -0.1]
    statuses = ["selected", "budget_excluded", "selected", "non_positive"]
    rows = [
        {"chunk_version_id": vid, "coefficients": {"r_strict": beta}, "status": status,
         "rank": rank}
        for vid, beta, status, rank in zip(drafts, betas, statuses, [1, 3, 2, 4], strict=True)
    ]  # fmt: skip
    retired = [{**rows[0]}, *rows[1:]]
    retired[3] = {**rows[3], "status": "retired", "rank": None}
    response = api.call(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": retired},
        expect=422,
    )
    assert response.json()["detail"][0]["loc"] == ["body", "rows", 3, "status"]
    decision = api.json(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=201,
    )
    assert (
        decision["provisional"] is False and [r["kind"] for r in decision["rows"]] == ["draft"] * 4
    )
    assert api.json("GET", f"/v1/gates/{run['id']}", role=Role.reader)["status"] == "complete"

    s0 = api.json(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        expect=201,
        json={
            "round": 0,
            "q": 0.2,
            "gate_decision_id": decision["id"],
            "entries": [
                {"chunk_version_id": drafts[0], "rho": 0.9, "coefficient": 0.3},
                {"chunk_version_id": drafts[2], "rho": 0.6666666666666667, "coefficient": 0.2},
            ],
        },
    )
    api.json("POST", f"/v1/banks/{s0['id']}/freeze", role=Role.evaluator)
    alias = api.json(
        "POST",
        "/v1/aliases",
        role=Role.evaluator,
        expect=201,
        json={"name": "current", "bank_id": s0["id"], "reason": "S0 from Gate A",
              "gate_decision_id": decision["id"]},
    )  # fmt: skip
    assert alias["bank_id"] == s0["id"]
    history = api.json("GET", "/v1/aliases/current/history", role=Role.reader)["items"]
    assert history[0]["gate_decision_id"] == decision["id"]
    listed = api.json("GET", "/v1/gates", role=Role.reader, params={"kind": "gate_a"})
    assert [r["id"] for r in listed["items"]] == [run["id"]]


LEGACY_NOTE = json.dumps(
    {
        "intraskill-evaluator": {
            "gate_kind": "online", "split": "val", "sample": 0, "budget": 6,
            "solver": "reference", "max_retries": 2, "n_tasks": 240,
            "identity": {"checkpoint_id": "ckpt-old", "decoding": "d", "prompt_version": "p",
                         "prompt_fingerprint": "f", "env_version": "e", "split": "val"},
        }
    },
    sort_keys=True,
)  # fmt: skip


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_migration_0002_lifts_the_evaluators_old_protocol_notes(backend, tmp_path):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'legacy.sqlite'}"
        name = None
    else:
        name = f"registry_legacy_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        url = f"{base}/{name}"
    try:
        upgrade(url, "0001")
        engine = sa.create_engine(url)
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "INSERT INTO checkpoints (id, uri, step, round, created_by, created_at) "
                    "VALUES ('ckpt-old', 'file:///old', 20, 0, 'trainer-bot', CURRENT_TIMESTAMP)"
                )
            )
            connection.execute(
                sa.text(
                    "INSERT INTO banks (id, status, q, round, created_by, created_at) "
                    "VALUES (1, 'draft', 0.2, 0, 'evaluator-bot', CURRENT_TIMESTAMP)"
                )
            )
            for run_id, note in [(1, LEGACY_NOTE), (2, "operator: closed by hand")]:
                connection.execute(
                    sa.text(
                        "INSERT INTO gate_runs (id, round, checkpoint_id, base_bank_id, "
                        "candidate_pool, mask_seed, status, note, created_by, created_at) "
                        "VALUES (:id, 0, 'ckpt-old', 1, :pool, 20260901, 'complete', :note, "
                        "'evaluator-bot', CURRENT_TIMESTAMP)"
                    ),
                    {"id": run_id, "pool": json.dumps({"columns": []}), "note": note},
                )
        upgrade(url)
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT id, kind, split, sample_id, budget, solver, n_tasks, identity, "
                    "base_bank_id, note FROM gate_runs ORDER BY id"
                )
            ).all()
        engine.dispose()
        lifted, untouched = rows
        assert tuple(lifted[1:7]) == ("online", "val", 0, 6, "reference", 240)
        assert lifted.identity is None and lifted.note == LEGACY_NOTE  # the old line is kept
        assert tuple(untouched[1:7]) == ("online", "val", 0, 10, "statsmodels", None)
    finally:
        if name is not None:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
