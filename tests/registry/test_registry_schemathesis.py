"""Property-based run over the OpenAPI document: whatever the input, never a 5xx.

Each operation gets a few generated requests (kept small so the suite stays fast on two cores)
against a database seeded with one of everything, so ids like 1 often hit real rows.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from registry_support import chunk_content, gate_protocol, headers
from schemathesis.checks import not_a_server_error

from services.registry.app import create_app
from services.registry.settings import RegistrySettings
from shared.registry_api.schemas import REWARD_COMPONENTS, Role


@pytest.fixture
def registry_schema(app, api):
    version = api.chunk("seed")["latest"]["id"]
    bank = api.bank([version])
    api.bank([version], freeze=False)
    api.checkpoint("ckpt-seed")
    api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": bank["id"], "reason": "seed"},
        expect=201,
    )
    run = api.json(
        "POST",
        "/v1/gates",
        expect=201,
        json={
            "round": 0,
            "checkpoint_id": "ckpt-seed",
            "base_bank_id": bank["id"],
            "mask_seed": 1,
            **gate_protocol(1),
            "candidate_pool": {
                "columns": [{"chunk_version_id": version, "kind": "current", "slot": 0}]
            },
        },
    )
    rewards = {name: 0.5 for name in REWARD_COMPONENTS}
    api.json(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        expect=201,
        json={
            "observations": [
                {"task_id": "t1", "inclusion": [1], "bare": rewards, "masked": rewards}
            ]
        },
    )
    card = {
        "round": 0,
        "task_id": "t1",
        "outcome": "ADD",
        "eligible": True,
        "deployable": {
            "failure_mechanism": "m",
            "applicable_when": "w",
            "observable_trigger": "t",
            "corrective_procedure": "p",
            "verification_step": "v",
        },
    }
    card_id = api.json("POST", "/v1/cards", json=card, expect=201)["id"]
    api.json(
        "POST",
        "/v1/candidates",
        expect=201,
        json={
            "round": 0,
            "operation": "ADD",
            "content": chunk_content("cand"),
            "source_card_ids": [card_id],
        },
    )
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def _operations() -> list[tuple[str, str]]:
    document = create_app(RegistrySettings(database_url="sqlite://")).openapi()
    return [(method, path) for path, item in document["paths"].items() for method in item]


OPERATIONS = _operations()
SEEDED = {"name": "current", "checkpoint_id": "ckpt-seed"}


# schemathesis' own pytest plugin does not run under this pytest; hypothesis drives it instead,
# one test per operation so a failure names the endpoint.
@pytest.mark.parametrize(
    ("method", "path"), OPERATIONS, ids=[f"{m.upper()} {p}" for m, p in OPERATIONS]
)
def test_no_server_errors(registry_schema, method, path):
    operation = registry_schema[path][method]
    statuses: list[int] = []

    @given(case=operation.as_strategy())
    @settings(
        max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    def check(case):
        response = case.call(headers=headers(Role.operator))
        statuses.append(response.status_code)
        case.validate_response(response, checks=[not_a_server_error])
        if case.path_parameters:
            # Again against the seeded rows, so generated bodies meet real objects too.
            case.path_parameters = {name: SEEDED.get(name, 1) for name in case.path_parameters}
            response = case.call(headers=headers(Role.operator))
            statuses.append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error])

    check()
    assert statuses, "no case was generated"
