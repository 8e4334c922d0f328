"""Bad input gets a 4xx naming the field; unknown ids 404; nothing stored is lost."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from registry_support import chunk_content
from sqlalchemy import text

from services.registry.errors import install_error_handlers
from shared.contracts.chunks import MAX_FIELD_CHARS, MAX_TITLE_CHARS
from shared.contracts.registry_api.schemas import Role


def _loc(response) -> list:
    return response.json()["detail"][0]["loc"]


@pytest.mark.parametrize(
    ("content", "loc"),
    [
        (chunk_content(procedure=[]), ["body", "content", "procedure"]),
        (
            {k: v for k, v in chunk_content().items() if k != "verify"},
            ["body", "content", "verify"],
        ),
        (chunk_content(title="t" * (MAX_TITLE_CHARS + 1)), ["body", "content", "title"]),
        (chunk_content(avoid="a" * (MAX_FIELD_CHARS + 1)), ["body", "content", "avoid"]),
        (chunk_content(verify="   "), ["body", "content", "verify"]),
        (chunk_content(procedure=["ok", ""]), ["body", "content", "procedure", 1]),
        (
            chunk_content(procedure=["ok", "buy B07XJ8C8F5 now"]),
            ["body", "content", "procedure", 1],
        ),
        (
            chunk_content(applies_when="when task-000123 appears"),
            ["body", "content", "applies_when"],
        ),
        (chunk_content(verify="order 12345678901 arrived"), ["body", "content", "verify"]),
        (chunk_content(title="match the ASIN"), ["body", "content", "title"]),
        (chunk_content(avoid="nul \x00 byte"), ["body", "content", "avoid"]),
        ({**chunk_content(), "extra": 1}, ["body", "content", "extra"]),
    ],
    ids=[
        "empty-procedure",
        "missing-verify",
        "long-title",
        "long-avoid",
        "blank-verify",
        "empty-step",
        "product-id",
        "task-id",
        "digit-run",
        "asin-word",
        "nul",
        "extra-field",
    ],
)
def test_bad_chunk_content_is_422_naming_the_field(api, app, content, loc):
    response = api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "bad", "content": content},
        expect=422,
    )
    assert _loc(response)[: len(loc)] == loc, response.json()
    with app.state.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM chunks")).scalar_one() == 0


def test_leak_finding_names_its_rule(api):
    response = api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "bad", "content": chunk_content(procedure=["click B07XJ8C8F5"])},
        expect=422,
    )
    assert response.json()["detail"][0]["type"] == "leak.product_id"


@pytest.mark.parametrize("slug", ["", "Upper", "-lead", "a" * 65, "spa ce"])
def test_bad_slug(api, slug):
    response = api.call(
        "POST", "/v1/chunks", role=Role.analyst, json={"slug": slug, "content": chunk_content()}
    )
    assert response.status_code == 422 and _loc(response) == ["body", "slug"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/banks/999",
        "/v1/banks/999/summary",
        "/v1/chunks/999",
        "/v1/chunks/999/versions",
        "/v1/chunk-versions/999",
        "/v1/aliases/nope",
        "/v1/aliases/nope/history",
        "/v1/aliases/nope/bank",
        "/v1/gates/999",
        "/v1/gates/999/observations",
        "/v1/gates/999/decision",
        "/v1/decisions/999",
        "/v1/cards/999",
        "/v1/cards/999/audit",
        "/v1/candidates/999",
        "/v1/evidence/999",
        "/v1/checkpoints/nope",
        "/v1/banks/999/render",
    ],
)
def test_unknown_ids_are_404(api, path):
    api.call("GET", path, role=Role.operator, expect=404)


def test_unknown_ids_in_writes(api):
    api.call("POST", "/v1/banks/999/freeze", role=Role.evaluator, expect=404)
    api.call("PATCH", "/v1/banks/999", role=Role.evaluator, json={"q": 0.1}, expect=404)
    api.call(
        "POST",
        "/v1/chunks/999/versions",
        role=Role.analyst,
        json={"content": chunk_content()},
        expect=404,
    )
    api.call(
        "PUT",
        "/v1/aliases/nope",
        role=Role.evaluator,
        json={"bank_id": 1, "reason": "r"},
        headers={"If-Match": '"r1"'},
        expect=404,
    )


@pytest.mark.parametrize(
    "path", ["/v1/banks/0", "/v1/banks/99999999999", "/v1/banks/abc", "/v1/aliases/UP"]
)
def test_malformed_path_ids_are_422(api, path):
    api.call("GET", path, role=Role.reader, expect=422)


def test_bank_entries_are_checked(api):
    version = api.chunk("one")["latest"]["id"]
    unknown = api.call(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={"entries": [{"chunk_version_id": 999, "rho": 0.5}]},
        expect=422,
    )
    assert _loc(unknown) == ["body", "entries", 0, "chunk_version_id"]
    twice = api.call(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={
            "entries": [
                {"chunk_version_id": version, "rho": 0.5},
                {"chunk_version_id": version, "rho": 0.5},
            ]
        },
        expect=422,
    )
    assert _loc(twice) == ["body", "entries", 1, "chunk_version_id"]
    rho = api.call(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={"entries": [{"chunk_version_id": version, "rho": 1.5}]},
        expect=422,
    )
    assert _loc(rho) == ["body", "entries", 0, "rho"]
    both = api.call(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={"from_bank_id": 1, "entries": [{"chunk_version_id": version, "rho": 0.5}]},
        expect=422,
    )
    assert _loc(both) == ["body", "entries"]


def test_non_finite_numbers_are_422(api):
    version = api.chunk("one")["latest"]["id"]
    raw = f'{{"entries": [{{"chunk_version_id": {version}, "rho": 0.5, "coefficient": NaN}}]}}'
    response = api.call(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        content=raw,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert _loc(response)[:4] == ["body", "entries", 0, "coefficient"]


def test_illegal_transitions_are_409(api):
    version = api.chunk("one")["latest"]["id"]
    draft = api.bank([version], freeze=False)
    api.call("POST", f"/v1/banks/{draft['id']}/retire", role=Role.evaluator, expect=409)
    api.call(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": draft["id"], "reason": "r"},
        expect=409,
    )
    frozen = api.bank([version])
    api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": frozen["id"], "reason": "r"},
        expect=201,
    )
    api.call(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": frozen["id"], "reason": "r"},
        expect=409,
    )
    api.call(
        "PUT",
        "/v1/aliases/current",
        json={"bank_id": draft["id"], "reason": "r"},
        headers={"If-Match": '"r1"'},
        expect=409,
    )
    api.call(
        "PUT", "/v1/aliases/current", json={"bank_id": frozen["id"], "reason": "r"}, expect=428
    )
    api.call(
        "POST", "/v1/aliases/current/rollback", json={"reason": "r"}, expect=409
    )  # nothing earlier
    api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "one", "content": chunk_content()},
        expect=409,
    )


def test_malformed_json_is_422(api):
    response = api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422


@pytest.mark.parametrize("field", ["extras", "privileged_audit"])
def test_nul_inside_free_form_json_is_422_and_stores_nothing(api, app, field):
    # Free-form JSON has no schema field by field, and Postgres' jsonb cannot hold \u0000.
    card = {
        "round": 0,
        "task_id": "task-000017",
        "outcome": "NO_PROPOSAL",
        "eligible": False,
        field: {"note": "nul \x00 inside"},
    }
    response = api.call("POST", "/v1/cards", role=Role.analyst, json=card, expect=422)
    assert _loc(response)[0] == "body"
    with app.state.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM failure_cards")).scalar_one() == 0
    api.call("POST", "/v1/cards", role=Role.analyst, json={**card, field: {}}, expect=201)


def test_a_value_the_database_refuses_is_422_not_500(app):
    """The back-stop behind the schemas: whatever value Postgres refuses (here a NUL escape in a
    JSON document, sent straight to the database) comes back as a 422 on the body."""
    probe = FastAPI()
    install_error_handlers(probe)

    @probe.post("/probe")
    def store_nul() -> None:
        with app.state.engine.connect() as connection:
            connection.execute(text("SELECT CAST(:doc AS jsonb)"), {"doc": '{"a": "\\u0000"}'})

    response = TestClient(probe, raise_server_exceptions=False).post("/probe")
    assert response.status_code == 422
    assert _loc(response) == ["body"]
