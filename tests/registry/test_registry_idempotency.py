"""Idempotency-Key: a replay returns the first response and writes nothing."""

from __future__ import annotations

from registry_support import chunk_content
from sqlalchemy import text

from shared.contracts.registry_api.schemas import Role


def _count(app, sql: str) -> int:
    with app.state.engine.connect() as connection:
        return connection.execute(text(sql)).scalar_one()


def test_replay_returns_first_response_and_writes_nothing(api, app):
    body = {"slug": "price-check", "content": chunk_content("x")}
    key = {"Idempotency-Key": "create-price-check"}
    first = api.call("POST", "/v1/chunks", role=Role.analyst, json=body, headers=key, expect=201)
    audit_before = _count(app, "SELECT count(*) FROM audit_log")
    second = api.call("POST", "/v1/chunks", role=Role.analyst, json=body, headers=key, expect=201)
    assert second.content == first.content
    assert second.headers["location"] == first.headers["location"]
    assert second.headers["idempotent-replayed"] == "true"
    assert _count(app, "SELECT count(*) FROM chunks") == 1
    assert _count(app, "SELECT count(*) FROM audit_log") == audit_before
    # Without the key the same body is a new request (and the slug is now taken).
    api.call("POST", "/v1/chunks", role=Role.analyst, json=body, expect=409)


def test_same_key_different_body_is_422(api):
    key = {"Idempotency-Key": "k"}
    api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "a", "content": chunk_content()},
        headers=key,
        expect=201,
    )
    response = api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "b", "content": chunk_content()},
        headers=key,
        expect=422,
    )
    assert response.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]


def test_keys_are_scoped_per_actor(api):
    key = {"Idempotency-Key": "shared-key"}
    api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "a", "content": chunk_content()},
        headers=key,
        expect=201,
    )
    # The operator's identical key is its own: a fresh request (here a conflict on the slug).
    api.call(
        "POST",
        "/v1/chunks",
        role=Role.operator,
        json={"slug": "a", "content": chunk_content()},
        headers=key,
        expect=409,
    )


def test_failed_request_leaves_no_record(api):
    key = {"Idempotency-Key": "retry-me"}
    body = {"bank_id": 1, "name": "current", "reason": "r"}
    api.call(
        "POST", "/v1/aliases", role=Role.evaluator, json=body, headers=key, expect=422
    )  # no bank 1 yet
    api.bank([api.chunk("one")["latest"]["id"]])
    api.call("POST", "/v1/aliases", role=Role.evaluator, json=body, headers=key, expect=201)


def test_replay_answers_even_after_the_state_moved_on(api, app):
    # (Every write operation's replay: test_registry_writes.py.)
    version = api.chunk("one")["latest"]["id"]
    bank = api.bank([version], freeze=False)
    key = {"Idempotency-Key": "freeze-1"}
    first = api.call(
        "POST", f"/v1/banks/{bank['id']}/freeze", role=Role.evaluator, headers=key, expect=200
    )
    # Without the key a second freeze is an illegal transition; with it, the first answer.
    replay = api.call(
        "POST", f"/v1/banks/{bank['id']}/freeze", role=Role.evaluator, headers=key, expect=200
    )
    assert replay.json() == first.json()
    api.call("POST", f"/v1/banks/{bank['id']}/freeze", role=Role.evaluator, expect=409)
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": bank["id"], "reason": "r"},
        expect=201,
    )
    other = api.bank([version])
    put_headers = {"If-Match": alias["etag"], "Idempotency-Key": "move-1"}
    moved = api.call(
        "PUT",
        "/v1/aliases/current",
        json={"bank_id": other["id"], "reason": "r"},
        headers=put_headers,
    )
    assert moved.status_code == 200
    # The same PUT again would be 412 (stale ETag); its key replays the success instead.
    again = api.call(
        "PUT",
        "/v1/aliases/current",
        json={"bank_id": other["id"], "reason": "r"},
        headers=put_headers,
    )
    assert again.status_code == 200 and again.json() == moved.json()
    assert _count(app, "SELECT count(*) FROM alias_events") == 2


def test_malformed_key_is_422(api):
    response = api.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": "a", "content": chunk_content()},
        headers={"Idempotency-Key": "x" * 300},
        expect=422,
    )
    assert response.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
