"""The role matrix, as the product's policy (docs/registry.md, "Authentication and roles").

`POLICY` is written down by hand, not read from the code's `x-roles`: widening a role in the
code fails `test_role_matrix` (the role now gets past 403) and
`test_published_roles_are_the_policy`. A new role-gated operation fails
`test_policy_covers_every_gated_operation` until it is added here.
"""

from __future__ import annotations

import re

import pytest
from registry_support import headers

from services.registry.app import create_app
from services.registry.settings import RegistrySettings
from shared.contracts.registry_api.schemas import Role

ANALYST, EVALUATOR, TRAINER, OPERATOR = Role.analyst, Role.evaluator, Role.trainer, Role.operator
POLICY: dict[tuple[str, str], set[Role]] = {
    ("POST", "/v1/chunks"): {ANALYST, OPERATOR},
    ("POST", "/v1/chunks/{chunk_id}/versions"): {ANALYST, OPERATOR},
    ("POST", "/v1/banks"): {EVALUATOR, OPERATOR},
    ("PATCH", "/v1/banks/{bank_id}"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/banks/{bank_id}/freeze"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/banks/{bank_id}/retire"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/banks/{bank_id}/retire-chunk"): {OPERATOR},
    ("POST", "/v1/banks/{bank_id}/restore-chunk"): {OPERATOR},
    ("POST", "/v1/aliases"): {EVALUATOR, OPERATOR},
    ("PUT", "/v1/aliases/{name}"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/aliases/{name}/rollback"): {OPERATOR},
    ("POST", "/v1/gates"): {EVALUATOR, OPERATOR},
    ("PATCH", "/v1/gates/{run_id}"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/gates/{run_id}/observations"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/gates/{run_id}/decision"): {EVALUATOR, OPERATOR},
    ("POST", "/v1/cards"): {ANALYST, OPERATOR},
    ("POST", "/v1/candidates"): {ANALYST, OPERATOR},
    ("GET", "/v1/cards/{card_id}/audit"): {
        ANALYST,
        OPERATOR,
    },  # the gold-aware half: a privileged read
    ("POST", "/v1/checkpoints"): {TRAINER, OPERATOR},
    ("POST", "/v1/evidence"): {TRAINER, OPERATOR},
    ("PATCH", "/v1/evidence/{group_id}"): {TRAINER, OPERATOR},
}
GATED = sorted(POLICY)
# Pages that need no token (probes, the API docs); every other read needs one, of any role.
PUBLIC = {"/healthz", "/readyz", "/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"}


def _document() -> dict:
    return create_app(RegistrySettings(database_url="sqlite://")).openapi()


DOCUMENT = _document()
READS = sorted(
    path
    for path, item in DOCUMENT["paths"].items()
    if "get" in item and ("GET", path) not in POLICY and path not in PUBLIC
)


def _concrete(path: str) -> str:
    return re.sub(
        r"\{(\w+)\}", lambda m: "x" if m.group(1) in {"name", "checkpoint_id"} else "1", path
    )


def test_policy_covers_every_gated_operation():
    gated = {
        (method.upper(), path)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if method != "get" or operation.get("x-roles")
    }
    assert gated == set(POLICY)


@pytest.mark.parametrize(("method", "path"), GATED, ids=[f"{m} {p}" for m, p in GATED])
def test_published_roles_are_the_policy(method, path):
    published = DOCUMENT["paths"][path][method.lower()].get("x-roles")
    assert published == sorted(role.value for role in POLICY[(method, path)])


@pytest.mark.parametrize(("method", "path"), GATED, ids=[f"{m} {p}" for m, p in GATED])
def test_role_matrix(client, method, path):
    url = _concrete(path)
    anonymous = client.request(method, url, json={})
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    wrong = client.request(method, url, json={}, headers={"Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401
    for role in Role:
        response = client.request(method, url, json={}, headers=headers(role))
        if role in POLICY[(method, path)]:
            assert response.status_code not in (401, 403), (role, response.text)
        else:
            assert response.status_code == 403, (role, response.status_code, response.text)
            assert role.value in response.json()["detail"]


@pytest.mark.parametrize("path", READS)
def test_reads_need_a_token(client, path):
    url = _concrete(path)
    assert client.get(url).status_code == 401
    bad = client.get(url, headers={"Authorization": "Bearer not-a-token"})
    assert bad.status_code == 401
    for role in Role:
        assert client.get(url, headers=headers(role)).status_code not in (401, 403), role


def test_public_pages_need_no_token(client):
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
