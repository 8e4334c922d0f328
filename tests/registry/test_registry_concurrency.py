"""Races against a live server on real Postgres: the database decides, losers get 4xx."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from registry_support import chunk_content, headers
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from shared.contracts.registry_api.schemas import Role


def _parallel(n: int, call):
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(call, range(n)))


def _waiting_for_locks(app) -> int:
    """Backends of this test database that wait for a lock (a table, a row or a transaction)."""
    with app.state.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()


def _released_together(app, table: str, n: int, call) -> list[httpx.Response]:
    """Run `call(0..n-1)` in threads while `table` is held against writes; once all n wait for
    a lock (at the write, or queued behind a row lock), release the table."""
    with app.state.engine.connect() as holder, ThreadPoolExecutor(max_workers=n) as pool:
        holder.execute(text(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"))
        futures = [pool.submit(call, i) for i in range(n)]
        deadline = time.monotonic() + 20
        while _waiting_for_locks(app) < n:
            assert time.monotonic() < deadline, f"the writers never queued at {table}"
            time.sleep(0.05)
        holder.commit()
        return [future.result() for future in futures]


def test_alias_movers_released_together_one_wins(api, app, live_server):
    banks = [api.bank([api.chunk(f"c{i}")["latest"]["id"]]) for i in range(2)]
    body = {"name": "current", "bank_id": banks[0]["id"], "reason": "r"}
    alias = api.json("POST", "/v1/aliases", json=body, expect=201)
    movers = 4

    def move(i: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=30) as http:
            return http.put(
                "/v1/aliases/current",
                json={"bank_id": banks[1]["id"], "reason": f"mover {i}"},
                headers=headers(Role.evaluator, **{"If-Match": alias["etag"]}),
            )

    # All movers hold the same ETag and are in flight before any of them can write: whether
    # they queue on the alias row or race to the compare-and-set, exactly one may win.
    codes = sorted(r.status_code for r in _released_together(app, "aliases", movers, move))
    assert codes == [200] + [412] * (movers - 1), codes
    history = api.json("GET", "/v1/aliases/current/history", role=Role.reader)["items"]
    assert [event["revision"] for event in history] == [1, 2]


def test_fifty_concurrent_alias_moves_with_one_etag(api, app, live_server):
    banks = [api.bank([api.chunk(f"c{i}")["latest"]["id"]]) for i in range(3)]
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": banks[0]["id"], "reason": "r"},
        expect=201,
    )

    def move(i: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=30) as http:
            return http.put(
                "/v1/aliases/current",
                json={"bank_id": banks[1 + i % 2]["id"], "reason": f"mover {i}"},
                headers=headers(Role.evaluator, **{"If-Match": alias["etag"]}),
            )

    responses = _parallel(50, move)
    codes = sorted(r.status_code for r in responses)
    assert codes.count(200) == 1 and codes.count(412) == 49, codes
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert winner["revision"] == 2

    current = api.json("GET", "/v1/aliases/current", role=Role.reader)
    assert current["bank_id"] == winner["bank_id"] and current["revision"] == 2
    history = api.json("GET", "/v1/aliases/current/history", role=Role.reader)["items"]
    assert [(e["revision"], e["from_bank_id"], e["to_bank_id"]) for e in history] == [
        (1, None, banks[0]["id"]),
        (2, banks[0]["id"], winner["bank_id"]),
    ]
    moves = api.json("GET", "/v1/audit", role=Role.reader, params={"action": "alias.move"})
    assert moves["total"] == 1


def test_racing_version_writers_get_409_never_500(api, app, live_server):
    chunk = api.chunk("price-check")
    audited = {"action": "chunk_version.create"}
    audit_before = api.json("GET", "/v1/audit", role=Role.reader, params=audited)["total"]
    writers = 6

    def add_version(i: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=30) as http:
            return http.post(
                f"/v1/chunks/{chunk['id']}/versions",
                json={"content": chunk_content(f"writer {i}")},
                headers=headers(Role.analyst),
            )

    # Every writer reads the same latest version, then all try version 2 at once: the unique
    # constraint lets one in and the rest must hear 409.
    responses = _released_together(app, "chunk_versions", writers, add_version)
    codes = sorted(response.status_code for response in responses)
    assert codes == [201] + [409] * (writers - 1), codes
    history = api.json("GET", f"/v1/chunks/{chunk['id']}/versions", role=Role.reader)["items"]
    assert [v["version"] for v in history] == [1, 2]
    creates = api.json("GET", "/v1/audit", role=Role.reader, params=audited)
    assert creates["total"] == audit_before + 1  # the winner's: losers leave no audit entry


def test_concurrent_replays_of_one_key_write_once(api, app, live_server):
    body = {"slug": "once", "content": chunk_content("once")}

    def create(_i: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=30) as http:
            return http.post(
                "/v1/chunks", json=body, headers=headers(Role.analyst, **{"Idempotency-Key": "k-1"})
            )

    responses = _parallel(16, create)
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["id"] for r in responses}) == 1
    with app.state.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM chunks")).scalar_one() == 1
        assert (
            connection.execute(
                text("SELECT count(*) FROM audit_log WHERE action='chunk.create'")
            ).scalar_one()
            == 1
        )


def test_append_only_tables_refuse_update_and_delete(api, app):
    api.chunk("one")
    for statement in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM chunk_versions"):
        with (
            app.state.engine.connect() as connection,
            pytest.raises(DBAPIError, match="append-only"),
        ):
            connection.execute(text(statement))
