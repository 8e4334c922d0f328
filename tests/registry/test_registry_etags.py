"""ETags as RFC 9110 defines them: `If-Match` compares strongly and `*` matches any current
alias; `If-None-Match` compares weakly (a `W/` tag matches) and `*` matches any frozen bank."""

from __future__ import annotations

import pytest

from services.registry.banks.cache import FrozenBankCache
from services.registry.concurrency import etag_matches, revisions_from_if_match
from shared.contracts.registry_api.schemas import Role

STRONG = '"abc123"'


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        ('"other"', False),
        (STRONG, True),
        ("W/" + STRONG, True),  # If-None-Match compares weakly: the W/ prefix is dropped
        ('"other", ' + STRONG, True),
        ('"other" ,W/' + STRONG, True),
        ("*", True),
        ('"other", *', True),
        ('W/"other"', False),
    ],
)
def test_if_none_match_comparison(header, matches):
    assert etag_matches(header, STRONG) is matches


@pytest.mark.parametrize(
    ("header", "revisions"),
    [
        ("*", None),  # any current revision
        ('"r3"', {3}),
        ('"r1", "r3"', {1, 3}),
        (' "r1" ,"r12"', {1, 12}),
        ('W/"r3"', set()),  # If-Match compares strongly: a weak tag never matches
        ('"3"', set()),
        ('"r3', set()),
    ],
)
def test_if_match_revisions(header, revisions):
    assert revisions_from_if_match(header) == revisions


@pytest.fixture
def aliased(api):
    """`current` on one frozen bank, and a second frozen bank to move it to."""
    version = api.chunk("one")["latest"]["id"]
    first, second = api.bank([version], rho=0.5), api.bank([version], rho=0.6)
    alias = api.json(
        "POST",
        "/v1/aliases",
        json={"name": "current", "bank_id": first["id"], "reason": "S0"},
        expect=201,
    )
    return alias, second


def _move(api, bank_id: int, if_match: str, expect: int):
    return api.call(
        "PUT",
        "/v1/aliases/current",
        role=Role.evaluator,
        json={"bank_id": bank_id, "reason": "r"},
        headers={"If-Match": if_match},
        expect=expect,
    )


def test_if_match_star_moves_whatever_the_revision(api, aliased):
    _alias, second = aliased
    moved = _move(api, second["id"], "*", 200)
    assert moved.json()["revision"] == 2 and moved.headers["etag"] == '"r2"'


def test_if_match_takes_a_list_and_refuses_weak_or_stale_tags(api, aliased):
    alias, second = aliased
    assert alias["etag"] == '"r1"'
    _move(api, second["id"], 'W/"r1"', 412)
    _move(api, second["id"], '"r7"', 412)
    _move(api, second["id"], '"r7", "r1"', 200)
    _move(api, second["id"], '"r1"', 412)  # stale now: the alias is at r2


@pytest.mark.parametrize("cached", [False, True], ids=["route", "fast-path"])
def test_if_none_match_on_a_frozen_bank(api, app, cached):
    bank = api.bank([api.chunk("one")["latest"]["id"]])
    path = f"/v1/banks/{bank['id']}"
    etag = api.call("GET", path, role=Role.reader, expect=200).headers["etag"]

    def get(header: str, expect: int) -> None:
        if not cached:  # an empty cache sends the read through the route, not the fast path
            app.state.bank_cache = FrozenBankCache(app.state.settings.bank_cache_size)
        api.call("GET", path, role=Role.reader, headers={"If-None-Match": header}, expect=expect)

    for header in (etag, "W/" + etag, "*", f'"nope", {etag}'):
        get(header, 304)
    get('"nope"', 200)
