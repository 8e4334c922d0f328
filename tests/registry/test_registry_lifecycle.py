"""The whole life of a bank: chunks -> draft -> frozen -> alias -> next bank -> rollback."""

from __future__ import annotations

from registry_support import CHINESE_CHUNK, chunk_content

from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.contracts.registry_api.schemas import Role


def test_full_lifecycle(api):
    first = api.chunk("query-build")
    second = api.chunk("price-check")
    v1, v2 = first["latest"]["id"], second["latest"]["id"]

    draft = api.json(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={
            "q": 0.2,
            "round": 0,
            "entries": [{"chunk_version_id": v1, "rho": 0.9, "coefficient": 0.07}],
        },
        expect=201,
    )
    assert draft["content_hash"] is None and draft["frozen_at"] is None
    summary = api.json("GET", f"/v1/banks/{draft['id']}/summary", role=Role.reader)
    assert summary["status"] == "draft"

    frozen = api.json("POST", f"/v1/banks/{draft['id']}/freeze", role=Role.evaluator)
    assert frozen["status"] == "frozen" and len(frozen["content_hash"]) == 64
    # A frozen bank is immutable: editing or re-freezing is an illegal transition.
    api.call("PATCH", f"/v1/banks/{draft['id']}", role=Role.evaluator, json={"q": 0.3}, expect=409)
    api.call("POST", f"/v1/banks/{draft['id']}/freeze", role=Role.evaluator, expect=409)

    alias = api.json(
        "POST",
        "/v1/aliases",
        role=Role.evaluator,
        json={"name": "current", "bank_id": draft["id"], "reason": "cold start"},
        expect=201,
    )
    assert alias["revision"] == 1
    resolved = api.call("GET", "/v1/aliases/current", role=Role.trainer, expect=200)
    assert resolved.json()["bank_id"] == draft["id"] and resolved.headers["etag"] == alias["etag"]

    # Round 1: a new bank built from the current one plus a second chunk.
    nxt = api.json(
        "POST",
        "/v1/banks",
        role=Role.evaluator,
        json={
            "round": 1,
            "parent_bank_id": draft["id"],
            "entries": [
                {"chunk_version_id": v1, "rho": 0.5, "coefficient": 0.02},
                {"chunk_version_id": v2, "rho": 0.9, "coefficient": 0.05},
            ],
        },
        expect=201,
    )
    api.json("POST", f"/v1/banks/{nxt['id']}/freeze", role=Role.evaluator)
    moved = api.json(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        json={"bank_id": nxt["id"], "reason": "gate 1"},
        headers={"If-Match": alias["etag"]},
    )
    assert moved["bank_id"] == nxt["id"] and moved["revision"] == 2
    # The old ETag is now stale.
    api.call(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        json={"bank_id": draft["id"], "reason": "stale"},
        headers={"If-Match": alias["etag"]},
        expect=412,
    )
    diff = api.json(
        "GET", f"/v1/banks/{nxt['id']}/diff", role=Role.reader, params={"against": draft["id"]}
    )
    assert [c["slug"] for c in diff["added"]] == ["price-check"]
    assert diff["rho_changes"] == [
        {"chunk_id": first["id"], "slug": "query-build", "from_rho": 0.9, "to_rho": 0.5}
    ]

    # Rollback is an operator's: the evaluator is refused, the operator moves it back.
    api.call(
        "POST",
        "/v1/aliases/current/rollback",
        role=Role.evaluator,
        json={"reason": "bad"},
        expect=403,
    )
    back = api.json(
        "POST", "/v1/aliases/current/rollback", json={"reason": "regression in round 1"}
    )
    assert back["bank_id"] == draft["id"] and back["revision"] == 3
    history = api.json("GET", "/v1/aliases/current/history", role=Role.reader)["items"]
    assert [(e["action"], e["from_bank_id"], e["to_bank_id"]) for e in history] == [
        ("create", None, draft["id"]),
        ("move", draft["id"], nxt["id"]),
        ("rollback", nxt["id"], draft["id"]),
    ]
    assert history[2]["actor"] == "operator-bot" and history[2]["reason"] == "regression in round 1"

    # Rollback as a new draft: copy the older bank; it is a child of it and freezes to the same
    # entries (a different hash only because the parent differs).
    copy = api.json(
        "POST", "/v1/banks", role=Role.evaluator, json={"from_bank_id": draft["id"]}, expect=201
    )
    assert copy["parent_bank_id"] == draft["id"]
    assert [e["chunk_version_id"] for e in copy["entries"]] == [v1]

    # Retiring a bank an alias points at is refused; the superseded one can retire.
    api.call("POST", f"/v1/banks/{draft['id']}/retire", role=Role.evaluator, expect=409)
    retired = api.json("POST", f"/v1/banks/{nxt['id']}/retire", role=Role.evaluator)
    assert retired["status"] == "retired" and retired["retired_at"]
    # Still readable (nothing is deleted), but no alias points at a retired bank: restoring it
    # means a frozen copy (the same content hash) to roll back to.
    api.json("GET", f"/v1/banks/{nxt['id']}", role=Role.reader)
    rollback = {"reason": "it was fine", "bank_id": nxt["id"]}
    api.call("POST", "/v1/aliases/current/rollback", json=rollback, expect=409)
    restored = api.json("POST", "/v1/banks", json={"from_bank_id": nxt["id"]}, expect=201)
    api.json("POST", f"/v1/banks/{restored['id']}/freeze")
    again = api.json(
        "POST", "/v1/aliases/current/rollback", json={**rollback, "bank_id": restored["id"]}
    )
    assert again["bank_id"] == restored["id"]

    audit = api.json("GET", "/v1/audit", role=Role.reader, params={"object_type": "alias"})
    assert [e["action"] for e in audit["items"]] == [
        "alias.create",
        "alias.move",
        "alias.rollback",
        "alias.rollback",
    ]
    assert audit["items"][1]["before"]["bank_id"] == draft["id"]
    assert audit["items"][1]["after"]["bank_id"] == nxt["id"]


def test_frozen_bank_etag_immutable_and_304(api):
    version = api.chunk("query-build")["latest"]["id"]
    bank = api.bank([version])
    response = api.call("GET", f"/v1/banks/{bank['id']}", role=Role.trainer, expect=200)
    body = response.json()
    assert response.headers["etag"] == f'"{body["content_hash"]}"'
    assert "immutable" in response.headers["cache-control"]
    again = api.call(
        "GET",
        f"/v1/banks/{bank['id']}",
        role=Role.trainer,
        headers={"If-None-Match": response.headers["etag"]},
    )
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == response.headers["etag"]
    other = api.call(
        "GET", f"/v1/banks/{bank['id']}", role=Role.trainer, headers={"If-None-Match": '"nope"'}
    )
    assert other.status_code == 200 and other.json() == body
    # A draft is never cached as immutable.
    draft = api.bank([version], freeze=False)
    response = api.call("GET", f"/v1/banks/{draft['id']}", role=Role.reader, expect=200)
    assert "etag" not in response.headers and response.headers["cache-control"] == "no-store"


def test_alias_bank_follows_the_alias(api):
    a = api.bank([api.chunk("one")["latest"]["id"]])
    b = api.bank([api.chunk("two")["latest"]["id"]])
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": a["id"], "reason": "r"},
        expect=201,
    )
    first = api.call("GET", "/v1/aliases/current/bank", role=Role.trainer, expect=200)
    assert (
        first.json()["id"] == a["id"]
        and first.headers["content-location"] == f"/v1/banks/{a['id']}"
    )
    api.json(
        "PUT",
        "/v1/aliases/current",
        json={"bank_id": b["id"], "reason": "r"},
        headers={"If-Match": alias["etag"]},
    )
    second = api.call(
        "GET",
        "/v1/aliases/current/bank",
        role=Role.trainer,
        headers={"If-None-Match": first.headers["etag"]},
    )
    assert second.status_code == 200 and second.json()["id"] == b["id"]


def test_render_matches_shared_renderer(api):
    chinese = api.json(
        "POST", "/v1/chunks", json={"slug": "query-zh", "content": CHINESE_CHUNK}, expect=201
    )
    other = api.chunk("price-check")
    bank = api.bank([chinese["latest"]["id"], other["latest"]["id"]])
    rendered = api.json(
        "GET", f"/v1/banks/{bank['id']}/render", role=Role.trainer, params={"inclusion": "1,0"}
    )
    expected = render_skill_block(
        [InjectedChunk(chunk_id="query-zh", version=1, content=ChunkContent(**CHINESE_CHUNK))]
    )
    assert rendered["text"] == expected
    assert "搜索查询构建 - 显式约束整合" in rendered["text"]
    assert [c["slug"] for c in rendered["injected"]] == ["query-zh"]
    full = api.json("GET", f"/v1/banks/{bank['id']}/render", role=Role.trainer)
    assert full["inclusion"] == [1, 1] and full["text"].count("<skill ") == 2
    empty = api.json(
        "GET", f"/v1/banks/{bank['id']}/render", role=Role.trainer, params={"inclusion": "0,0"}
    )
    assert empty["text"] == "" and empty["injected"] == []
    for bad in ("1", "1,0,1", "1,2", "yes,no", "1;0"):
        response = api.call(
            "GET", f"/v1/banks/{bank['id']}/render", role=Role.trainer, params={"inclusion": bad}
        )
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
            "query",
            "inclusion",
        ]


def test_chinese_chunk_round_trips_byte_for_byte(api):
    created = api.json(
        "POST", "/v1/chunks", json={"slug": "query-zh", "content": CHINESE_CHUNK}, expect=201
    )
    assert created["latest"]["content"] == CHINESE_CHUNK
    fetched = api.json("GET", f"/v1/chunks/{created['id']}/versions/1", role=Role.reader)
    assert fetched["content"] == CHINESE_CHUNK
    assert fetched["content_hash"] == ChunkContent(**CHINESE_CHUNK).content_hash()


def test_versions_dedup_and_history(api):
    chunk = api.chunk("price-check")
    cid = chunk["id"]
    same = api.call(
        "POST", f"/v1/chunks/{cid}/versions", json={"content": chunk_content("price-check")}
    )
    assert same.status_code == 200 and same.json()["version"] == 1
    v2 = api.json(
        "POST", f"/v1/chunks/{cid}/versions", json={"content": chunk_content("v2")}, expect=201
    )
    assert v2["version"] == 2
    # Reverting to the first text adds version 3 but stores the text once.
    v3 = api.json(
        "POST",
        f"/v1/chunks/{cid}/versions",
        json={"content": chunk_content("price-check")},
        expect=201,
    )
    assert v3["version"] == 3 and v3["content_hash"] == chunk["latest"]["content_hash"]
    history = api.json("GET", f"/v1/chunks/{cid}/versions", role=Role.reader)
    assert [v["version"] for v in history["items"]] == [1, 2, 3] and history["total"] == 3
    assert api.json("GET", f"/v1/chunks/{cid}", role=Role.reader)["latest"]["version"] == 3
    with api.client.app.state.engine.connect() as connection:
        from sqlalchemy import text

        assert connection.execute(text("SELECT count(*) FROM chunk_texts")).scalar_one() == 2


def test_operator_retire_and_restore_chunk_make_new_drafts(api):
    a, b = api.chunk("one"), api.chunk("two")
    bank = api.bank([a["latest"]["id"], b["latest"]["id"]])
    api.call(
        "POST",
        f"/v1/banks/{bank['id']}/retire-chunk",
        role=Role.evaluator,
        json={"chunk_id": a["id"], "reason": "x"},
        expect=403,
    )
    without = api.json(
        "POST",
        f"/v1/banks/{bank['id']}/retire-chunk",
        json={"chunk_id": a["id"], "reason": "misleads the policy"},
        expect=201,
    )
    assert [e["slug"] for e in without["entries"]] == ["two"] and without["parent_bank_id"] == bank[
        "id"
    ]
    assert (
        api.json("GET", f"/v1/banks/{without['id']}/summary", role=Role.reader)["status"] == "draft"
    )
    restored = api.json(
        "POST",
        f"/v1/banks/{without['id']}/restore-chunk",
        json={"chunk_id": a["id"], "rho": 0.4, "position": 0, "reason": "operator judgement"},
        expect=201,
    )
    assert [e["slug"] for e in restored["entries"]] == ["one", "two"]
    assert restored["entries"][0]["rho"] == 0.4
    # The original bank is untouched.
    assert len(api.json("GET", f"/v1/banks/{bank['id']}", role=Role.reader)["entries"]) == 2


def test_fast_path_answers_exactly_like_the_route(api, app):
    version = api.chunk("one")["latest"]["id"]
    bank = api.bank([version])
    path = f"/v1/banks/{bank['id']}"
    assert app.state.bank_cache.get(bank["id"]) is None
    routed = api.call("GET", path, role=Role.reader, expect=200)  # fills the cache
    assert app.state.bank_cache.get(bank["id"]) is not None
    cached = api.call("GET", path, role=Role.reader, expect=200)  # served before routing
    assert cached.content == routed.content
    for header in ("etag", "cache-control", "content-type", "content-length"):
        assert cached.headers[header] == routed.headers[header], header
    etag = {"If-None-Match": routed.headers["etag"]}
    assert api.call("GET", path, role=Role.reader, headers=etag).status_code == 304
    # Without a valid token the cached bank is still refused, with the route's 401.
    assert api.call("GET", path, role=None).status_code == 401
    bad = api.client.get(path, headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401 and bad.json() == {"detail": "unknown bearer token"}
