"""Alias listings: the history pages over one alias only; the alias listing filters by bank."""

from __future__ import annotations

from shared.contracts.registry_api.schemas import Role


def _move(api, name: str, bank_id: int) -> None:
    etag = api.json("GET", f"/v1/aliases/{name}", role=Role.reader)["etag"]
    body = {"bank_id": bank_id, "reason": "r"}
    api.json("PUT", f"/v1/aliases/{name}", json=body, headers={"If-Match": etag})


def test_history_pages_over_its_own_alias(api):
    banks = [api.bank([api.chunk(f"c{i}")["latest"]["id"]])["id"] for i in range(3)]
    for name in ("current", "staging"):
        body = {"name": name, "bank_id": banks[0], "reason": "S0"}
        api.json("POST", "/v1/aliases", json=body, expect=201)
    for bank_id in (banks[1], banks[2], banks[1]):
        _move(api, "current", bank_id)
    page = {"limit": 2, "offset": 1}
    history = api.json("GET", "/v1/aliases/current/history", role=Role.reader, params=page)
    assert history["total"] == 4  # create + three moves; staging's event is not counted
    assert [event["revision"] for event in history["items"]] == [2, 3]
    assert history["next_offset"] == 3
    staging = api.json("GET", "/v1/aliases/staging/history", role=Role.reader)
    assert staging["total"] == 1 and [e["alias"] for e in staging["items"]] == ["staging"]


def test_alias_listing_filters_by_bank(api):
    banks = [api.bank([api.chunk(f"c{i}")["latest"]["id"]])["id"] for i in range(2)]
    for name, bank_id in (("zeta", banks[0]), ("alpha", banks[0]), ("beta", banks[1])):
        body = {"name": name, "bank_id": bank_id, "reason": "r"}
        api.json("POST", "/v1/aliases", json=body, expect=201)
    every = api.json("GET", "/v1/aliases", role=Role.reader)
    assert [a["name"] for a in every["items"]] == ["alpha", "beta", "zeta"]
    on_first = api.json("GET", "/v1/aliases", role=Role.reader, params={"bank_id": banks[0]})
    assert on_first["total"] == 2
    assert [a["name"] for a in on_first["items"]] == ["alpha", "zeta"]
    paged = api.json("GET", "/v1/aliases", role=Role.reader, params={"limit": 1, "offset": 1})
    assert [a["name"] for a in paged["items"]] == ["beta"] and paged["total"] == 3
