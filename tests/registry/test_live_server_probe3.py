"""Issue 28: a third live probe of a real `intraskill registry serve` process, on Postgres and
on SQLite.

Each test pins one finding: a loop that stalled after its first admission (a settled candidate
re-settled by a later gate), gates sharing a candidate, bodies and query bounds that crashed the
server, an audit tail that skipped entries, look-alike names, invisible text, -0.0, doubled
Authorization headers, an operator's retire undone by an evaluator, readiness blind to
unwritable databases, and pages without a size cap.
"""

from __future__ import annotations

import pytest
from live_server import LiveRegistry, unique
from registry_support import chunk_content, gate_protocol

from shared.registry_api.schemas import REWARD_COMPONENTS, Role

# ---------------------------------------------------------------- the loop's records


def rewards(value: float) -> dict[str, float]:
    return {name: value for name in REWARD_COMPONENTS}


class Loop:
    """The records one round of the slow loop leaves, made through the API by the role that
    makes each in the product (docs/registry.md)."""

    def __init__(self, registry: LiveRegistry) -> None:
        self.registry = registry
        self.checkpoint = unique("ckpt")
        body = {"id": self.checkpoint, "uri": "file:///ckpt", "step": 20, "round": 0}
        registry.ok("POST", "/v1/checkpoints", role=Role.trainer, json=body)

    def candidate(self, round: int) -> dict:
        """An ADD candidate of `round`, backed by a card of its own."""
        tag = unique("cand")
        deployable = {
            "failure_mechanism": "the query dropped the budget",
            "applicable_when": "the task states a budget",
            "observable_trigger": "results above budget",
            "corrective_procedure": "add the budget to the query",
            "verification_step": "first page prices fit the budget",
        }
        card = self.registry.ok(
            "POST",
            "/v1/cards",
            role=Role.analyst,
            json={
                "round": round,
                "task_id": f"task-{tag}",
                "outcome": "ADD",
                "eligible": True,
                "privileged_audit": {"earliest_divergence": "step 2"},
                "deployable": deployable,
            },
        )
        body = {
            "round": round,
            "operation": "ADD",
            "slug": tag,
            "content": chunk_content(tag),
            "source_card_ids": [card["id"]],
        }
        return self.registry.ok("POST", "/v1/candidates", role=Role.analyst, json=body)

    def gate(self, round: int, base_bank_id: int, columns: list[tuple[int, str]]):
        """POST an online gate over `columns` ((version id, kind), one slot each)."""
        pool = [
            {"chunk_version_id": vid, "kind": kind, "slot": slot}
            for slot, (vid, kind) in enumerate(columns)
        ]
        body = {
            "round": round,
            "checkpoint_id": self.checkpoint,
            "base_bank_id": base_bank_id,
            "candidate_pool": {"columns": pool},
            "mask_seed": 7,
            **gate_protocol(1),
        }
        return self.registry.call("POST", "/v1/gates", role=Role.evaluator, json=body)

    def observe(self, gate: dict) -> None:
        width = len(gate["candidate_pool"]["columns"])
        observation = {
            "task_id": "val-0",
            "inclusion": [1] * width,
            "bare": rewards(0),
            "masked": rewards(1),
        }
        self.registry.ok(
            "POST",
            f"/v1/gates/{gate['id']}/observations",
            role=Role.evaluator,
            json={"observations": [observation]},
        )

    def decide(self, gate: dict, statuses: dict[int, str]):
        """POST a final decision: version id -> status (selected ones ranked in that order)."""
        rows = []
        for rank, (vid, status) in enumerate(statuses.items(), 1):
            selected = status == "selected"
            rows.append(
                {
                    "chunk_version_id": vid,
                    "status": status,
                    "rank": rank if selected else None,
                    "coefficients": {"r_strict": 0.2 if selected else -0.1},
                }
            )
        return self.registry.call(
            "POST", f"/v1/gates/{gate['id']}/decision", role=Role.evaluator, json={"rows": rows}
        )

    def bank(self, version_ids: list[int], decision_id: int) -> dict:
        return self.registry.bank(version_ids, gate_decision_id=decision_id)

    def candidate_now(self, candidate: dict) -> dict:
        return self.registry.ok("GET", f"/v1/candidates/{candidate['id']}")


# ---------------------------------------------------------------- 1. three rounds


def test_three_rounds_with_an_admission_in_the_first(registry: LiveRegistry):
    """Item 1 (High): X, admitted in round 1, is a `current` column in round 2 (kept) and in
    round 3 (retired). Each final decision must be stored (201: a bank may cite it) and must
    leave X as round 1 settled it: selected by decision 1. Before the fix Postgres answered
    409 to round 2's decision and SQLite rewrote X's settlement."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])

    # Round 1: X is proposed and admitted.
    x = loop.candidate(1)
    gate = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")])
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    first = loop.decide(gate.json(), {anchor: "selected", x["chunk_version_id"]: "selected"})
    assert first.status_code == 201, first.text
    d1 = first.json()["id"]
    assert loop.candidate_now(x)["status"] == "selected"
    bank1 = loop.bank([anchor, x["chunk_version_id"]], d1)

    # Round 2: X is current and kept; Y, proposed this round, is not admitted.
    y = loop.candidate(2)
    columns = [(anchor, "current"), (x["chunk_version_id"], "current"), (y["chunk_version_id"], "add")]
    gate = loop.gate(2, bank1["id"], columns)
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    second = loop.decide(
        gate.json(),
        {anchor: "selected", x["chunk_version_id"]: "selected", y["chunk_version_id"]: "non_positive"},
    )
    assert second.status_code == 201, second.text
    d2 = second.json()["id"]
    assert registry.ok("GET", f"/v1/gates/{gate.json()['id']}")["status"] == "complete"
    assert (loop.candidate_now(x)["status"], loop.candidate_now(x)["decision_id"]) == ("selected", d1)
    assert (loop.candidate_now(y)["status"], loop.candidate_now(y)["decision_id"]) == ("rejected", d2)
    bank2 = loop.bank([anchor, x["chunk_version_id"]], d2)  # a bank may cite round 2's decision

    # Round 3: X is current and retired; Z, proposed this round, is admitted.
    z = loop.candidate(3)
    columns = [(anchor, "current"), (x["chunk_version_id"], "current"), (z["chunk_version_id"], "add")]
    gate = loop.gate(3, bank2["id"], columns)
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    third = loop.decide(
        gate.json(),
        {anchor: "selected", z["chunk_version_id"]: "selected", x["chunk_version_id"]: "retired"},
    )
    assert third.status_code == 201, third.text
    d3 = third.json()["id"]
    assert (loop.candidate_now(x)["status"], loop.candidate_now(x)["decision_id"]) == ("selected", d1)
    assert (loop.candidate_now(z)["status"], loop.candidate_now(z)["decision_id"]) == ("selected", d3)
    loop.bank([anchor, z["chunk_version_id"]], d3)


# ---------------------------------------------------------------- 2. gates sharing a candidate


def test_a_gate_over_a_settled_candidate_is_refused(registry: LiveRegistry):
    """Item 2: creating a gate did not check that its candidates were still proposed."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])
    x = loop.candidate(1)
    gate = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")]).json()
    loop.observe(gate)
    decided = loop.decide(gate, {anchor: "selected", x["chunk_version_id"]: "non_positive"})
    assert decided.status_code == 201, decided.text
    again = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")])
    assert again.status_code == 422, again.text
    assert f"candidate {x['id']}" in again.text and "rejected" in again.text
    assert again.json()["detail"][0]["loc"] == ["body", "candidate_pool", "columns", 1, "chunk_version_id"]


def test_two_open_gates_sharing_a_candidate_settle_it_once(registry: LiveRegistry):
    """Item 2: two open gates of one round shared candidate X; both final decisions were
    stored and X ended rejected by the second after being selected by the first."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])
    x = loop.candidate(1)
    columns = [(anchor, "current"), (x["chunk_version_id"], "add")]
    gates = [loop.gate(1, base["id"], columns).json() for _ in range(2)]
    for gate in gates:
        loop.observe(gate)
    first = loop.decide(gates[0], {anchor: "selected", x["chunk_version_id"]: "selected"})
    assert first.status_code == 201, first.text
    second = loop.decide(gates[1], {anchor: "selected", x["chunk_version_id"]: "non_positive"})
    assert second.status_code == 409, second.text
    assert f"candidate {x['id']}" in second.text
    assert loop.candidate_now(x)["status"] == "selected"
    assert loop.candidate_now(x)["decision_id"] == first.json()["id"]
    assert registry.ok("GET", f"/v1/gates/{gates[1]['id']}")["status"] == "open"
    # What is left to it: a provisional close, which settles nothing.
    provisional = registry.call(
        "POST",
        f"/v1/gates/{gates[1]['id']}/decision",
        role=Role.evaluator,
        json={
            "provisional": True,
            "rows": [
                {"chunk_version_id": anchor, "status": "selected", "rank": 1,
                 "coefficients": {"r_strict": 0.2}},
                {"chunk_version_id": x["chunk_version_id"], "status": "non_positive",
                 "coefficients": {"r_strict": -0.1}},
            ],
        },
    )  # fmt: skip
    assert provisional.status_code == 201, provisional.text
    assert loop.candidate_now(x)["decision_id"] == first.json()["id"]
