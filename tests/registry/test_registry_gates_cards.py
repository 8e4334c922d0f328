"""The slow loop's and the gate's records: evidence -> cards -> candidates -> gate -> next bank."""

from __future__ import annotations

import pytest
from registry_support import CHINESE_CHUNK, chunk_content, gate_protocol

from shared.contracts.registry_api.schemas import REWARD_COMPONENTS, Role


def online_gate(base_bank_id: int, columns: list[dict], *, mask_seed: int, n_tasks: int) -> dict:
    """The body of a round-0 online gate over `columns`."""
    return {
        "round": 0,
        "checkpoint_id": "ckpt-r0",
        "base_bank_id": base_bank_id,
        "candidate_pool": {"columns": columns},
        "mask_seed": mask_seed,
        **gate_protocol(n_tasks),
    }


def rewards(strict: float) -> dict[str, float]:
    return {name: strict for name in REWARD_COMPONENTS}


def card_body(
    outcome: str = "ADD", *, eligible: bool = True, target: int | None = None, **extra
) -> dict:
    deployable = {
        "failure_mechanism": "the query dropped the budget",
        "applicable_when": "the task states a budget",
        "observable_trigger": "results above budget",
        "corrective_procedure": "add the budget to the query",
        "verification_step": "first page prices fit the budget",
        "target_chunk_id": target,
    }
    body = {
        "round": 0,
        "task_id": "task-000017",
        "outcome": outcome,
        "eligible": eligible,
        "privileged_audit": {"gold_asin": "B07XJ8C8F5", "earliest_divergence": "step 2"},
        "deployable": None if outcome == "NO_PROPOSAL" else deployable,
    }
    return {**body, **extra}


@pytest.fixture
def world(api):
    """A frozen current bank of two chunks, a checkpoint, and the `current` alias."""
    a = api.json(
        "POST", "/v1/chunks", json={"slug": "query-zh", "content": CHINESE_CHUNK}, expect=201
    )
    b = api.chunk("price-check")
    bank = api.bank([a["latest"]["id"], b["latest"]["id"]])
    api.checkpoint("ckpt-r0")
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": bank["id"], "reason": "S0"},
        expect=201,
    )
    return {"a": a, "b": b, "bank": bank, "alias": alias}


def test_round_trip_from_evidence_to_next_bank(api, world):
    bank = world["bank"]
    group = api.json(
        "POST",
        "/v1/evidence",
        role=Role.trainer,
        expect=201,
        json={
            "task_id": "task-000017",
            "round": 0,
            "step": 7,
            "group_index": 3,
            "treatment": {"mode": "assisted", "inclusion": [1, 0], "hash": "abc"},
            "bank_id": bank["id"],
            "checkpoint_id": "ckpt-r0",
        },
    )
    assert group["retry_outcome"] == "pending"
    settled = api.json(
        "PATCH", f"/v1/evidence/{group['id']}", role=Role.trainer, json={"retry_outcome": "failure"}
    )
    assert settled["retry_outcome"] == "failure"
    api.call(
        "PATCH",
        f"/v1/evidence/{group['id']}",
        role=Role.trainer,
        json={"retry_outcome": "success"},
        expect=409,
    )
    pending = api.json(
        "GET", "/v1/evidence", role=Role.analyst, params={"retry_outcome": "failure"}
    )
    assert [g["id"] for g in pending["items"]] == [group["id"]]

    add_card = api.json(
        "POST",
        "/v1/cards",
        role=Role.analyst,
        json=card_body("ADD", evidence_id=group["id"]),
        expect=201,
    )
    rewrite_card = api.json(
        "POST",
        "/v1/cards",
        role=Role.analyst,
        json=card_body("REWRITE", target=world["a"]["id"]),
        expect=201,
    )
    # The privileged audit never leaves through the card or the audit log.
    assert "privileged_audit" not in add_card
    assert "B07XJ8C8F5" not in api.call("GET", "/v1/audit", role=Role.reader).text
    api.call("GET", f"/v1/cards/{add_card['id']}/audit", role=Role.trainer, expect=403)
    audit = api.json("GET", f"/v1/cards/{add_card['id']}/audit", role=Role.analyst)
    assert audit["privileged_audit"]["gold_asin"] == "B07XJ8C8F5"

    add = api.json(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=201,
        json={
            "round": 0,
            "operation": "ADD",
            "slug": "budget-query",
            "content": chunk_content("budget"),
            "source_card_ids": [add_card["id"]],
        },
    )
    rewrite = api.json(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=201,
        json={
            "round": 0,
            "operation": "REWRITE",
            "target_chunk_id": world["a"]["id"],
            "content": {**CHINESE_CHUNK, "verify": "验证首屏商品价格均在预算内"},
            "source_card_ids": [rewrite_card["id"]],
        },
    )
    assert rewrite["chunk_id"] == world["a"]["id"] and rewrite["version"] == 2
    version = api.json("GET", f"/v1/chunk-versions/{rewrite['chunk_version_id']}", role=Role.reader)
    assert version["source"] == "analyst"
    assert version["provenance"] == {
        "card_ids": [rewrite_card["id"]],
        "candidate_id": rewrite["id"],
    }
    api.call(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=409,
        json={
            "round": 1,
            "operation": "ADD",
            "content": chunk_content("budget"),
            "source_card_ids": [add_card["id"]],
        },
    )

    a_old = world["a"]["latest"]["id"]
    b_cur = world["b"]["latest"]["id"]
    columns = [
        {"chunk_version_id": a_old, "kind": "current", "slot": 0},
        {
            "chunk_version_id": rewrite["chunk_version_id"],
            "kind": "rewrite",
            "slot": 0,
            "candidate_id": rewrite["id"],
        },
        {"chunk_version_id": b_cur, "kind": "current", "slot": 1},
        {
            "chunk_version_id": add["chunk_version_id"],
            "kind": "add",
            "slot": 2,
            "candidate_id": add["id"],
        },
    ]
    run = api.json(
        "POST",
        "/v1/gates",
        role=Role.evaluator,
        expect=201,
        json=online_gate(bank["id"], columns, mask_seed=20260901, n_tasks=12),
    )
    assert run["status"] == "open"
    observations = [
        {
            "task_id": f"val-{i}",
            "slot_states": [i % 3, i % 2, (i // 2) % 2],
            "inclusion": [int(i % 3 == 1), int(i % 3 == 2), i % 2, (i // 2) % 2],
            "bare": rewards(0.0),
            "masked": rewards(float(i % 2)),
        }
        for i in range(12)
    ]
    result = api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": observations[:8]},
        expect=201,
    )
    assert result == {"gate_run_id": run["id"], "accepted": 8, "n_observations": 8}
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": observations[8:]},
        expect=201,
    )
    dup = api.call(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": observations[:1]},
        expect=409,
    )
    assert "val-0" in dup.json()["detail"]
    stored = api.json(
        "GET", f"/v1/gates/{run['id']}/observations", role=Role.reader, params={"limit": 500}
    )
    assert stored["total"] == 12 and stored["items"][3]["masked"]["r_strict"] == 1.0
    assert stored["items"][3]["inclusion"] == observations[3]["inclusion"]

    coefficient = {"r_strict": 0.05, "r_success": 0.04}
    rows = [
        {"chunk_version_id": a_old, "coefficients": {"r_strict": 0.01}, "status": "rewrite_loser"},
        {
            "chunk_version_id": rewrite["chunk_version_id"],
            "coefficients": coefficient,
            "rank": 1,
            "status": "selected",
            "hc3_se": {"r_strict": 0.02},
            "ci_low": {"r_strict": 0.01},
            "ci_high": {"r_strict": 0.09},
        },
        {"chunk_version_id": b_cur, "coefficients": {"r_strict": -0.01}, "status": "retired"},
        {
            "chunk_version_id": add["chunk_version_id"],
            "coefficients": {"r_strict": 0.03},
            "rank": 2,
            "status": "selected",
        },
    ]
    missing = api.call(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows[:3]},
        expect=422,
    )
    assert missing.json()["detail"][0]["loc"] == ["body", "rows"]
    decision = api.json(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=201,
    )
    assert decision["n_observations"] == 12 and [r["slot"] for r in decision["rows"]] == [
        0,
        0,
        1,
        2,
    ]
    assert decision["rows"][1]["hc3_se"] == {"r_strict": 0.02}
    api.call(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=409,
    )
    api.call(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [{**observations[0], "task_id": "late"}]},
        expect=409,
    )
    assert api.json("GET", f"/v1/gates/{run['id']}", role=Role.reader)["status"] == "complete"
    assert (
        api.json("GET", f"/v1/candidates/{rewrite['id']}", role=Role.reader)["status"] == "selected"
    )
    assert (
        api.json("GET", "/v1/candidates", role=Role.reader, params={"status": "selected"})["total"]
        == 2
    )

    nxt = api.json(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        expect=201,
        json={
            "round": 1,
            "parent_bank_id": bank["id"],
            "gate_decision_id": decision["id"],
            "entries": [
                {"chunk_version_id": rewrite["chunk_version_id"], "rho": 0.9, "coefficient": 0.05},
                {"chunk_version_id": add["chunk_version_id"], "rho": 0.62, "coefficient": 0.03},
            ],
        },
    )
    api.json("POST", f"/v1/banks/{nxt['id']}/freeze", role=Role.evaluator)
    moved = api.json(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        headers={"If-Match": world["alias"]["etag"]},
        json={"bank_id": nxt["id"], "reason": "gate round 0", "gate_decision_id": decision["id"]},
    )
    assert moved["revision"] == 2
    event = api.json("GET", "/v1/aliases/current/history", role=Role.reader)["items"][-1]
    assert event["gate_decision_id"] == decision["id"]
    diff = api.json(
        "GET", f"/v1/banks/{nxt['id']}/diff", role=Role.reader, params={"against": bank["id"]}
    )
    assert [c["slug"] for c in diff["added"]] == ["budget-query"]
    assert [c["slug"] for c in diff["retired"]] == ["price-check"]
    assert diff["rewritten"] == [
        {"chunk_id": world["a"]["id"], "slug": "query-zh", "from_version": 1, "to_version": 2}
    ]


def test_observations_are_validated(api, world):
    a = world["a"]
    v2 = api.json(
        "POST", f"/v1/chunks/{a['id']}/versions", json={"content": chunk_content("v2")}, expect=201
    )
    columns = [
        {"chunk_version_id": a["latest"]["id"], "kind": "current", "slot": 0},
        {"chunk_version_id": v2["id"], "kind": "rewrite", "slot": 0},
    ]
    run = api.json(
        "POST",
        "/v1/gates",
        role=Role.evaluator,
        expect=201,
        json=online_gate(world["bank"]["id"], columns, mask_seed=1, n_tasks=10),
    )
    base = {"task_id": "t", "bare": rewards(0), "masked": rewards(1)}
    cases = [
        ({**base, "inclusion": [1]}, ["body", "observations", 0, "inclusion"]),
        ({**base, "inclusion": [1, 2]}, ["body", "observations", 0, "inclusion", 1]),
        ({**base, "inclusion": [1, 1]}, ["body", "observations", 0, "inclusion"]),
        (
            {**base, "inclusion": [1, 0], "slot_states": [2]},
            ["body", "observations", 0, "slot_states", 0],
        ),
        (
            {**base, "inclusion": [1, 0], "slot_states": [1, 0]},
            ["body", "observations", 0, "slot_states"],
        ),
        (
            {**base, "inclusion": [1, 0], "bare": {"r_strict": 1}},
            ["body", "observations", 0, "bare", "r_success"],
        ),
    ]
    for observation, loc in cases:
        response = api.call(
            "POST",
            f"/v1/gates/{run['id']}/observations",
            role=Role.evaluator,
            json={"observations": [observation]},
            expect=422,
        )
        assert response.json()["detail"][0]["loc"][: len(loc)] == loc, (
            observation,
            response.json(),
        )
    bad_pool = api.call(
        "POST",
        "/v1/gates",
        role=Role.evaluator,
        json=online_gate(
            world["bank"]["id"],
            [{"chunk_version_id": v2["id"], "kind": "rewrite", "slot": 0}],
            mask_seed=1,
            n_tasks=10,
        ),
        expect=422,
    )
    assert bad_pool.json()["detail"][0]["loc"][:3] == ["body", "candidate_pool", "columns"]
    closed = api.json(
        "PATCH", f"/v1/gates/{run['id']}", role=Role.evaluator, json={"status": "incomplete"}
    )
    assert closed["status"] == "incomplete"
    api.call(
        "PATCH",
        f"/v1/gates/{run['id']}",
        role=Role.evaluator,
        json={"status": "failed"},
        expect=409,
    )


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (card_body("NO_PROPOSAL", eligible=True), ["body", "eligible"]),
        (card_body("REWRITE"), ["body", "deployable", "target_chunk_id"]),
        (card_body("ADD", target=1), ["body", "deployable", "target_chunk_id"]),
        ({**card_body("ADD"), "deployable": None}, ["body", "deployable"]),
        (
            {**card_body("ADD"), "firewall_findings": [{"rule": "gold_brand", "text": "Acme"}]},
            ["body", "eligible"],
        ),
        (
            {
                **card_body("ADD"),
                "deployable": {
                    **card_body("ADD")["deployable"],
                    "corrective_procedure": "buy B07XJ8C8F5",
                },
            },
            ["body", "deployable", "corrective_procedure"],
        ),
    ],
    ids=[
        "no-proposal-eligible",
        "rewrite-no-target",
        "add-with-target",
        "add-no-deployable",
        "findings",
        "leak",
    ],
)
def test_card_rules(api, world, body, loc):
    response = api.call("POST", "/v1/cards", role=Role.analyst, json=body, expect=422)
    assert response.json()["detail"][0]["loc"] == loc


def test_ineligible_cards_keep_their_findings(api, world):
    body = {
        **card_body("ADD", eligible=False),
        "firewall_findings": [{"rule": "gold_brand", "text": "Acme"}],
    }
    card = api.json("POST", "/v1/cards", role=Role.analyst, json=body, expect=201)
    # Every role sees the rule; the gold it matched only in the privileged audit (issue 21).
    [shown] = card["firewall_findings"]
    assert shown["rule"] == "gold_brand" and "Acme" not in shown["text"]
    audit = api.json("GET", f"/v1/cards/{card['id']}/audit", role=Role.analyst)
    assert audit["firewall_findings"] == [{"rule": "gold_brand", "text": "Acme", "field": None}]
    # Candidates only cite eligible cards.
    response = api.call(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=422,
        json={
            "round": 0,
            "operation": "ADD",
            "content": chunk_content("z"),
            "source_card_ids": [card["id"]],
        },
    )
    assert response.json()["detail"][0]["loc"] == ["body", "source_card_ids", 0]
    listing = api.json("GET", "/v1/cards", role=Role.reader, params={"eligible": False})
    assert listing["total"] == 1


def test_rewrite_must_change_the_text(api, world):
    card = api.json(
        "POST",
        "/v1/cards",
        role=Role.analyst,
        json=card_body("REWRITE", target=world["b"]["id"]),
        expect=201,
    )
    response = api.call(
        "POST",
        "/v1/candidates",
        role=Role.analyst,
        expect=422,
        json={
            "round": 0,
            "operation": "REWRITE",
            "target_chunk_id": world["b"]["id"],
            "content": chunk_content("price-check"),
            "source_card_ids": [card["id"]],
        },
    )
    assert response.json()["detail"][0]["loc"] == ["body", "content"]


def test_evidence_inclusion_must_fit_the_bank(api, world):
    body = {
        "task_id": "t",
        "round": 0,
        "step": 1,
        "group_index": 0,
        "bank_id": world["bank"]["id"],
        "checkpoint_id": "ckpt-r0",
        "treatment": {"mode": "assisted", "inclusion": [1, 0, 1]},
    }
    response = api.call("POST", "/v1/evidence", role=Role.trainer, json=body, expect=422)
    assert response.json()["detail"][0]["loc"] == ["body", "treatment", "inclusion"]
    free = {**body, "treatment": {"mode": "skill_free", "inclusion": [1, 0]}}
    api.call("POST", "/v1/evidence", role=Role.trainer, json=free, expect=422)
    api.call(
        "POST",
        "/v1/evidence",
        role=Role.trainer,
        json={**body, "checkpoint_id": "nope"},
        expect=422,
    )
    api.call(
        "POST",
        "/v1/checkpoints",
        role=Role.trainer,
        json={"id": "ckpt-r0", "uri": "x", "step": 1, "round": 0},
        expect=409,
    )


@pytest.mark.parametrize(
    ("current_row", "add_row"),
    [
        ({"status": "selected", "coefficients": {"r_strict": 0.1}}, None),  # no rank
        ({"status": "selected", "rank": 1, "coefficients": {"r_strict": -0.1}}, None),
        ({"status": "non_positive", "coefficients": {"r_strict": -0.1}}, None),  # current retires
        ({"status": "rewrite_loser", "coefficients": {"r_strict": 0.1}}, None),  # no family
        (
            None,
            {"status": "retired", "coefficients": {"r_strict": -0.1}},
        ),  # candidates don't retire
        (None, {"status": "non_positive", "coefficients": {"r_strict": 0.1}}),
        (None, {"status": "budget_excluded", "coefficients": {"r_strict": -0.1}}),
    ],
)
def test_decision_statuses_follow_the_selection_rule(api, world, current_row, add_row):
    new = api.chunk("new")["latest"]["id"]
    current = world["a"]["latest"]["id"]
    columns = [
        {"chunk_version_id": current, "kind": "current", "slot": 0},
        {"chunk_version_id": new, "kind": "add", "slot": 1},
    ]
    run = api.json(
        "POST",
        "/v1/gates",
        role=Role.evaluator,
        expect=201,
        json=online_gate(world["bank"]["id"], columns, mask_seed=1, n_tasks=1),
    )
    obs = {"task_id": "t", "inclusion": [1, 1], "bare": rewards(0), "masked": rewards(1)}
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": [obs]},
        expect=201,
    )
    good_current = {"status": "selected", "rank": 1, "coefficients": {"r_strict": 0.2}}
    good_add = {"status": "non_positive", "coefficients": {"r_strict": -0.1}}
    rows = [
        {"chunk_version_id": current, **(current_row or good_current)},
        {"chunk_version_id": new, **(add_row or good_add)},
    ]
    response = api.call(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=422,
    )
    bad_index = 0 if current_row else 1
    assert response.json()["detail"][0]["loc"] == ["body", "rows", bad_index, "status"]
    rows = [{"chunk_version_id": current, **good_current}, {"chunk_version_id": new, **good_add}]
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/decision",
        role=Role.evaluator,
        json={"rows": rows},
        expect=201,
    )
