"""Every write, one by one (`write_catalog.WRITES`): each leaves its audit entry, each replays
under its Idempotency-Key without writing again."""

from __future__ import annotations

from registry_support import ACTORS
from write_catalog import WRITES, WriteWalk

from shared.contracts.registry_api.schemas import Role


def _audit_total(api) -> int:
    return api.json("GET", "/v1/audit", role=Role.reader, params={"limit": 1})["total"]


def _audit_since(api, offset: int) -> list[dict]:
    page = {"offset": offset, "limit": 500}
    return api.json("GET", "/v1/audit", role=Role.reader, params=page)["items"]


def test_the_catalog_holds_every_write(app):
    offered = {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if method != "get"
    }
    assert {write.operation for write in WRITES} == offered
    assert len(WRITES) == len(offered) == 20


def test_every_write_leaves_its_audit_entry(api):
    walk = WriteWalk(api)
    for write, request in walk:
        before = _audit_total(api)
        walk.send(write, request)
        entries = _audit_since(api, before)
        assert write.action in [e["action"] for e in entries], (write.operation, entries)
        for entry in entries:
            assert (entry["actor"], entry["role"]) == (ACTORS[write.role], write.role.value)


def test_every_write_replays_under_its_key(api, app):
    walk = WriteWalk(api)
    for index, (write, request) in enumerate(walk):
        key = {"Idempotency-Key": f"write-{index}"}
        first = walk.send(write, request, **key)
        before = _audit_total(api)
        again = walk.call(write, request, **key)
        assert again.headers.get("idempotent-replayed") == "true", write.operation
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert _audit_total(api) == before, f"{write.operation} wrote again on replay"
