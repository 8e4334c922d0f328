"""The role matrix, over every write operation the OpenAPI document lists.

Parametrized from the schema itself, so a new endpoint is covered the moment it exists: a write
without `x-roles` (i.e. without a role dependency) fails `test_every_write_is_role_gated`.
"""

from __future__ import annotations

import re

import pytest
from registry_support import headers

from services.registry.app import create_app
from services.registry.settings import RegistrySettings
from shared.registry_api.schemas import Role

WRITE_METHODS = {"post", "put", "patch", "delete"}


def _operations() -> list[tuple[str, str, list[str] | None]]:
    schema = create_app(RegistrySettings(database_url="sqlite://")).openapi()
    return [
        (method.upper(), path, operation.get("x-roles"))
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method in WRITE_METHODS or operation.get("x-roles")
    ]


OPERATIONS = _operations()


def _concrete(path: str) -> str:
    return re.sub(
        r"\{(\w+)\}", lambda m: "x" if m.group(1) in {"name", "checkpoint_id"} else "1", path
    )


def test_there_are_write_operations():
    assert len([op for op in OPERATIONS if op[0] != "GET"]) >= 20


@pytest.mark.parametrize(
    ("method", "path", "roles"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_every_write_is_role_gated(method, path, roles):
    assert roles, f"{method} {path} has no role dependency"
    assert "reader" not in roles and "operator" in roles


@pytest.mark.parametrize(
    ("method", "path", "roles"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_role_matrix(client, method, path, roles):
    url = _concrete(path)
    anonymous = client.request(method, url, json={})
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    wrong = client.request(method, url, json={}, headers={"Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401
    for role in Role:
        response = client.request(method, url, json={}, headers=headers(role))
        if role.value in roles:
            assert response.status_code not in (401, 403), (role, response.text)
        else:
            assert response.status_code == 403, (role, response.status_code, response.text)
            assert role.value in response.json()["detail"]


def test_reads_need_a_token(client):
    assert client.get("/v1/banks").status_code == 401
    assert client.get("/v1/banks", headers=headers(Role.reader)).status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_production_is_protected(api):
    a = api.bank([api.chunk("one")["latest"]["id"]])
    b = api.bank([api.chunk("two")["latest"]["id"]])
    body = {"name": "production", "bank_id": a["id"], "reason": "release"}
    api.call("POST", "/v1/aliases", role=Role.evaluator, json=body, expect=403)
    alias = api.json("POST", "/v1/aliases", role=Role.operator, json=body, expect=201)
    assert alias["protected"] is True
    move = {"bank_id": b["id"], "reason": "promote"}
    api.call(
        "PUT",
        "/v1/aliases/production",
        role=Role.evaluator,
        json=move,
        headers={"If-Match": alias["etag"]},
        expect=403,
    )
    moved = api.json(
        "PUT", "/v1/aliases/production", json=move, headers={"If-Match": alias["etag"]}
    )
    assert moved["bank_id"] == b["id"]
    # `current` is the evaluator's to move.
    cur = api.json(
        "POST", "/v1/aliases", role=Role.evaluator, json={**body, "name": "current"}, expect=201
    )
    api.json(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        json=move,
        headers={"If-Match": cur["etag"]},
    )
