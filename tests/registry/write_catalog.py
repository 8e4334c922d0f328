"""Every write the registry offers, each performed once with a body that succeeds.

`WRITES` is written down by hand: per role-gated operation, the role that does it in the product
(docs/registry.md), the audit action it must leave, and a step that builds its request from what
the steps before it made. The steps run in order, so later writes meet real objects (a frozen
bank for the alias, an observed gate for the decision). Tests walk them with `WriteWalk`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from registry_support import Api, chunk_content, gate_protocol

from shared.contracts.registry_api.schemas import REWARD_COMPONENTS, Role

State = dict[str, Any]


@dataclass(frozen=True)
class Request:
    path: str
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Write:
    method: str
    template: str  # the OpenAPI path
    role: Role
    action: str  # the audit action it must leave
    build: Callable[[Api, State], Request]
    keep: str | None = None  # store the JSON answer in State under this name

    @property
    def operation(self) -> tuple[str, str]:
        return (self.method, self.template)


def _rewards(value: float) -> dict[str, float]:
    return {name: value for name in REWARD_COMPONENTS}


def _chunk(api: Api, s: State) -> Request:
    return Request("/v1/chunks", {"slug": "price-check", "content": chunk_content("v1")})


def _version(api: Api, s: State) -> Request:
    return Request(f"/v1/chunks/{s['chunk']['id']}/versions", {"content": chunk_content("v2")})


def _bank(api: Api, s: State) -> Request:
    s["other_chunk"] = api.chunk("other")
    versions = [s["version"]["id"], s["other_chunk"]["latest"]["id"]]
    s["versions"] = versions
    entries = [{"chunk_version_id": v, "rho": 0.5, "coefficient": 0.01} for v in versions]
    return Request("/v1/banks", {"entries": entries})


def _bank_update(api: Api, s: State) -> Request:
    return Request(f"/v1/banks/{s['bank']['id']}", {"note": "tuned"})


def _freeze(api: Api, s: State) -> Request:
    return Request(f"/v1/banks/{s['bank']['id']}/freeze")


def _alias(api: Api, s: State) -> Request:
    return Request("/v1/aliases", {"name": "current", "bank_id": s["bank"]["id"], "reason": "S0"})


def _move(api: Api, s: State) -> Request:
    s["next_bank"] = api.bank([s["versions"][1]])
    return Request(
        "/v1/aliases/current",
        {"bank_id": s["next_bank"]["id"], "reason": "gate passed"},
        {"If-Match": s["alias"]["etag"]},
    )


def _rollback(api: Api, s: State) -> Request:
    return Request("/v1/aliases/current/rollback", {"reason": "regression"})


def _retire(api: Api, s: State) -> Request:
    # The rollback left `current` on the first bank: the second one is free to retire.
    return Request(f"/v1/banks/{s['next_bank']['id']}/retire")


def _retire_chunk(api: Api, s: State) -> Request:
    body = {"chunk_id": s["other_chunk"]["id"], "reason": "misleads on bundles"}
    return Request(f"/v1/banks/{s['bank']['id']}/retire-chunk", body)


def _restore_chunk(api: Api, s: State) -> Request:
    body = {"chunk_id": s["other_chunk"]["id"], "rho": 0.4, "reason": "fixed upstream"}
    return Request(f"/v1/banks/{s['without']['id']}/restore-chunk", body)


def _checkpoint(api: Api, s: State) -> Request:
    return Request(
        "/v1/checkpoints", {"id": "ckpt-r0", "uri": "file:///ckpt", "step": 20, "round": 0}
    )


def _evidence(api: Api, s: State) -> Request:
    treatment = {"mode": "assisted", "inclusion": [1, 0], "hash": "abc"}
    body = {
        "task_id": "task-000017",
        "round": 0,
        "step": 7,
        "group_index": 3,
        "treatment": treatment,
        "bank_id": s["bank"]["id"],
        "checkpoint_id": "ckpt-r0",
    }
    return Request("/v1/evidence", body)


def _settle(api: Api, s: State) -> Request:
    return Request(f"/v1/evidence/{s['evidence']['id']}", {"retry_outcome": "failure"})


def _card(api: Api, s: State) -> Request:
    deployable = {
        "failure_mechanism": "the query dropped the budget",
        "applicable_when": "the task states a budget",
        "observable_trigger": "results above budget",
        "corrective_procedure": "add the budget to the query",
        "verification_step": "first page prices fit the budget",
    }
    body = {
        "round": 0,
        "task_id": "task-000017",
        "evidence_id": s["evidence"]["id"],
        "outcome": "ADD",
        "eligible": True,
        "privileged_audit": {"earliest_divergence": "step 2"},
        "deployable": deployable,
    }
    return Request("/v1/cards", body)


def _candidate(api: Api, s: State) -> Request:
    body = {
        "round": 0,
        "operation": "ADD",
        "slug": "budget-query",
        "content": chunk_content("budget"),
        "source_card_ids": [s["card"]["id"]],
    }
    return Request("/v1/candidates", body)


def _gate(api: Api, s: State) -> Request:
    columns = [{"chunk_version_id": s["versions"][0], "kind": "current", "slot": 0}]
    body = {
        "round": 0,
        "checkpoint_id": "ckpt-r0",
        "base_bank_id": s["bank"]["id"],
        "candidate_pool": {"columns": columns},
        "mask_seed": 7,
        **gate_protocol(1),
    }
    return Request("/v1/gates", body)


def _observations(api: Api, s: State) -> Request:
    observation = {"task_id": "val-0", "inclusion": [1], "bare": _rewards(0), "masked": _rewards(1)}
    return Request(f"/v1/gates/{s['gate']['id']}/observations", {"observations": [observation]})


def _decision(api: Api, s: State) -> Request:
    row = {
        "chunk_version_id": s["versions"][0],
        "status": "selected",
        "rank": 1,
        "coefficients": {"r_strict": 0.2},
    }
    return Request(f"/v1/gates/{s['gate']['id']}/decision", {"rows": [row]})


def _close_gate(api: Api, s: State) -> Request:
    # A second gate that could not be fitted: closed without a decision.
    body = _gate(api, s).json
    run = api.json("POST", "/v1/gates", role=Role.evaluator, json=body, expect=201)
    return Request(f"/v1/gates/{run['id']}", {"status": "incomplete", "note": "too few tasks"})


WRITES: tuple[Write, ...] = (
    Write("POST", "/v1/chunks", Role.analyst, "chunk.create", _chunk, keep="chunk"),
    Write(
        "POST",
        "/v1/chunks/{chunk_id}/versions",
        Role.analyst,
        "chunk_version.create",
        _version,
        keep="version",
    ),
    Write("POST", "/v1/banks", Role.evaluator, "bank.create", _bank, keep="bank"),
    Write("PATCH", "/v1/banks/{bank_id}", Role.evaluator, "bank.update", _bank_update),
    Write("POST", "/v1/banks/{bank_id}/freeze", Role.evaluator, "bank.freeze", _freeze),
    Write("POST", "/v1/aliases", Role.evaluator, "alias.create", _alias, keep="alias"),
    Write("PUT", "/v1/aliases/{name}", Role.evaluator, "alias.move", _move),
    Write("POST", "/v1/aliases/{name}/rollback", Role.operator, "alias.rollback", _rollback),
    Write("POST", "/v1/banks/{bank_id}/retire", Role.evaluator, "bank.retire", _retire),
    Write(
        "POST",
        "/v1/banks/{bank_id}/retire-chunk",
        Role.operator,
        "bank.retire_chunk",
        _retire_chunk,
        keep="without",
    ),
    Write(
        "POST",
        "/v1/banks/{bank_id}/restore-chunk",
        Role.operator,
        "bank.restore_chunk",
        _restore_chunk,
    ),
    Write("POST", "/v1/checkpoints", Role.trainer, "checkpoint.create", _checkpoint),
    Write("POST", "/v1/evidence", Role.trainer, "evidence.create", _evidence, keep="evidence"),
    Write("PATCH", "/v1/evidence/{group_id}", Role.trainer, "evidence.settle", _settle),
    Write("POST", "/v1/cards", Role.analyst, "card.create", _card, keep="card"),
    Write("POST", "/v1/candidates", Role.analyst, "candidate.create", _candidate),
    Write("POST", "/v1/gates", Role.evaluator, "gate_run.create", _gate, keep="gate"),
    Write(
        "POST",
        "/v1/gates/{run_id}/observations",
        Role.evaluator,
        "gate_run.observations",
        _observations,
    ),
    Write("POST", "/v1/gates/{run_id}/decision", Role.evaluator, "gate_decision.create", _decision),
    Write("PATCH", "/v1/gates/{run_id}", Role.evaluator, "gate_run.close", _close_gate),
)


class WriteWalk:
    """Walks `WRITES` in order: iterating builds each request (after the writes before it);
    `send` performs it, checks it succeeded, and keeps what later steps need. Between the two a
    test may look at the database or the audit log; after `send` it may replay the request."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.state: State = {}

    def __iter__(self) -> Iterator[tuple[Write, Request]]:
        for write in WRITES:
            yield write, write.build(self.api, self.state)

    def send(self, write: Write, request: Request, **headers: str) -> httpx.Response:
        response = self.call(write, request, **headers)
        assert 200 <= response.status_code < 300, (write.operation, response.text)
        if write.keep:
            self.state[write.keep] = response.json()
        return response

    def call(self, write: Write, request: Request, **headers: str) -> httpx.Response:
        return self.api.call(
            write.method,
            request.path,
            role=write.role,
            json=request.json,
            headers={**request.headers, **headers},
        )
