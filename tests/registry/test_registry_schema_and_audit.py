"""Alembic owns the schema (models and migrations agree); listings page; audit entries carry
before, after, actor and role (that every write leaves one: test_registry_writes.py)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from registry_support import chunk_content
from sqlmodel import SQLModel

import services.registry.models  # noqa: F401
from shared.contracts.registry_api.schemas import Role


def test_migrations_match_the_models(app):
    with app.state.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        differences = compare_metadata(context, SQLModel.metadata)
    # The banks -> gate_decisions FK is added by the migration on Postgres only (the tables refer
    # to each other); it is the one thing the models do not declare.
    unexpected = [
        d
        for d in differences
        if not (d[0] == "remove_fk" and d[1].name == "fk_banks_gate_decision")
    ]
    assert unexpected == []


def test_no_delete_operations(app):
    methods = {method for item in app.openapi()["paths"].values() for method in item}
    assert "delete" not in methods


def test_listings_page(api):
    for index in range(7):
        api.chunk(f"chunk-{index}")
    first = api.json("GET", "/v1/chunks", role=Role.reader, params={"limit": 3})
    assert [c["slug"] for c in first["items"]] == ["chunk-0", "chunk-1", "chunk-2"]
    assert first["total"] == 7 and first["next_offset"] == 3
    last = api.json("GET", "/v1/chunks", role=Role.reader, params={"limit": 3, "offset": 6})
    assert [c["slug"] for c in last["items"]] == ["chunk-6"] and last["next_offset"] is None
    prefix = api.json("GET", "/v1/chunks", role=Role.reader, params={"slug_prefix": "chunk-1"})
    assert prefix["total"] == 1
    api.call("GET", "/v1/chunks", role=Role.reader, params={"limit": 501}, expect=422)


def test_audit_entries_record_before_after_and_actor(api):
    chunk = api.chunk("one")
    api.json(
        "POST",
        f"/v1/chunks/{chunk['id']}/versions",
        json={"content": chunk_content("2")},
        expect=201,
    )
    bank = api.bank([chunk["latest"]["id"]], freeze=False)
    api.json("PATCH", f"/v1/banks/{bank['id']}", role=Role.evaluator, json={"note": "tuned"})
    api.json("POST", f"/v1/banks/{bank['id']}/freeze", role=Role.evaluator)
    other = api.bank([chunk["latest"]["id"]])
    api.json("POST", f"/v1/banks/{other['id']}/retire", role=Role.evaluator)
    api.checkpoint("ckpt")
    entries = api.json("GET", "/v1/audit", role=Role.reader, params={"limit": 500})["items"]
    actions = [e["action"] for e in entries]
    for expected in (
        "chunk.create",
        "chunk_version.create",
        "bank.create",
        "bank.update",
        "bank.freeze",
        "bank.retire",
        "checkpoint.create",
    ):
        assert expected in actions, expected
    update = next(e for e in entries if e["action"] == "bank.update")
    assert update["before"]["note"] is None and update["after"]["note"] == "tuned"
    assert update["actor"] == "evaluator-bot" and update["role"] == "evaluator"
    by_actor = api.json("GET", "/v1/audit", role=Role.reader, params={"actor": "evaluator-bot"})
    assert {e["actor"] for e in by_actor["items"]} == {"evaluator-bot"}
