"""Issue 22 (and the registry half of issue 21): a second live probe of a real
`intraskill registry serve` process, on Postgres and on SQLite.

Each test pins one defect the probe found: races that left a bank unservable or answered 503,
nested JSON that crashed the server or poisoned the audit log, look-alike text and names, token
and path-id gaps, exactly-once citations and gold readable outside the privileged audit. The
app-role and frozen-database tests are in `test_live_server_database_roles.py`.
"""

from __future__ import annotations

import unicodedata

import pytest
from live_server import TWICE_LISTED_TOKEN, LiveRegistry, concurrently, unique
from registry_support import chunk_content, headers

from shared.contracts.registry_api.schemas import Role


def versions(registry: LiveRegistry, n: int) -> list[int]:
    return [registry.chunk(unique(f"v{i}"))["latest"]["id"] for i in range(n)]


def entries(version_ids: list[int]) -> list[dict]:
    return [{"chunk_version_id": vid, "rho": 0.5} for vid in version_ids]


# ---------------------------------------------------------------- 1. freeze racing a PATCH


def test_a_freeze_racing_an_entries_patch_never_freezes_other_content(registry: LiveRegistry):
    """Item 1: freeze and PATCH both answered 200; the freeze hashed 1 entry while 3 were
    stored, and the bank then answered 500 for good (Postgres, 19 runs in 20)."""
    one, *three = versions(registry, 4)
    for _ in range(10):
        draft = registry.bank([one], freeze=False)
        freeze = {
            "method": "POST",
            "url": f"/v1/banks/{draft['id']}/freeze",
            "headers": headers(Role.evaluator),
        }
        patch = {
            "method": "PATCH",
            "url": f"/v1/banks/{draft['id']}",
            "json": {"entries": entries(three)},
            "headers": headers(Role.evaluator),
        }
        frozen, patched = concurrently(registry.url, [freeze, patch])
        assert frozen.status_code == 200, frozen.text
        # The PATCH either came first (and the freeze hashed its 3 entries) or lost (409).
        assert patched.status_code in (200, 409), patched.text
        expected = 3 if patched.status_code == 200 else 1
        assert frozen.json()["n_entries"] == expected
        document = registry.call("GET", f"/v1/banks/{draft['id']}")
        assert document.status_code == 200, document.text
        assert len(document.json()["entries"]) == expected
        assert document.headers["etag"] == f'"{frozen.json()["content_hash"]}"'
        rendered = registry.ok("GET", f"/v1/banks/{draft['id']}/render")
        assert len(rendered["injected"]) == expected


# ---------------------------------------------------------------- 5. parent cycles at once


def test_concurrent_parent_cycle_patches_answer_422_never_503(registry: LiveRegistry):
    """Item 5: two drafts made each other's parent at once deadlocked on Postgres and the loser
    heard 503 "unavailable" (9 runs in 10); one must win and the other hear the cycle (422)."""
    [version] = versions(registry, 1)
    for _ in range(10):
        first, second = (registry.bank([version], freeze=False) for _ in range(2))
        patches = [
            {
                "method": "PATCH",
                "url": f"/v1/banks/{bank['id']}",
                "json": {"parent_bank_id": other["id"]},
                "headers": headers(Role.evaluator),
            }
            for bank, other in ((first, second), (second, first))
        ]
        answers = concurrently(registry.url, patches)
        assert sorted(answer.status_code for answer in answers) == [200, 422], [
            answer.text for answer in answers
        ]
        parents = [
            registry.ok("GET", f"/v1/banks/{bank['id']}/summary")["parent_bank_id"]
            for bank in (first, second)
        ]
        assert parents.count(None) == 1


# ---------------------------------------------------------------- 7. smaller items


def test_a_token_listed_active_and_revoked_is_refused(registry: LiveRegistry):
    """Item 7: the same token listed twice, once revoked, stayed usable."""
    response = registry.call(
        "GET", "/v1/banks", role=None, headers={"Authorization": f"Bearer {TWICE_LISTED_TOKEN}"}
    )
    assert response.status_code == 401, response.text


@pytest.mark.parametrize(
    "name", ["production.", "production-", "production_", "pr0duction", "prod.uction"]
)
def test_look_alikes_of_a_protected_alias_are_protected(registry: LiveRegistry, name: str):
    """Item 7: an evaluator created `production.`, a look-alike of the protected `production`."""
    [bank] = [registry.bank(versions(registry, 1))]
    body = {"name": name, "bank_id": bank["id"], "reason": "look-alike"}
    refused = registry.call("POST", "/v1/aliases", role=Role.evaluator, json=body)
    assert refused.status_code == 403, refused.text
    assert registry.call("GET", f"/v1/aliases/{name}").status_code == 404


def test_an_ordinary_alias_near_a_protected_name_is_not_protected(registry: LiveRegistry):
    """The fold is not over-eager: `production-v2` reads differently and stays an evaluator's."""
    bank = registry.bank(versions(registry, 1))
    name = unique("production-v2")
    created = registry.call(
        "POST",
        "/v1/aliases",
        role=Role.evaluator,
        json={"name": name, "bank_id": bank["id"], "reason": "r"},
    )
    assert created.status_code == 201, created.text
    assert created.json()["protected"] is False


@pytest.mark.parametrize("spelling", ["+{id}", "0{id}", "%20{id}", "{id}%20", "{id}.0"])
def test_path_and_query_ids_are_plain_decimal(registry: LiveRegistry, spelling: str):
    """Item 7: `+1`, `01` and `%201` resolved to id 1 though the docs say ids are strict."""
    [version] = versions(registry, 1)
    bank = registry.bank([version])
    chunk_id = registry.ok("GET", f"/v1/chunk-versions/{version}")["chunk_id"]
    for path in (
        f"/v1/banks/{spelling.format(id=bank['id'])}",
        f"/v1/banks/{spelling.format(id=bank['id'])}/summary",
        f"/v1/chunks/{spelling.format(id=chunk_id)}",
        f"/v1/banks/{bank['id']}/diff?against={spelling.format(id=bank['id'])}",
        f"/v1/banks?parent_bank_id={spelling.format(id=bank['id'])}",
    ):
        response = registry.call("GET", path)
        assert response.status_code in (404, 422), (path, response.status_code, response.text)
    assert registry.call("GET", f"/v1/banks/{bank['id']}").status_code == 200


def test_every_answer_says_nosniff(registry: LiveRegistry):
    """Item 7: `X-Content-Type-Options: nosniff` on every answer, whichever layer wrote it."""
    bank = registry.bank(versions(registry, 1))
    registry.ok("GET", f"/v1/banks/{bank['id']}")  # cached: the next GET takes the fast path
    answers = [
        registry.call("GET", f"/v1/banks/{bank['id']}"),  # fast path, 200
        registry.call("GET", f"/v1/banks/{bank['id']}/summary"),  # route, 200
        registry.call("GET", "/v1/banks", role=None),  # 401
        registry.call("GET", "/v1/banks/2000000000"),  # 404
        registry.call("POST", "/v1/cards", content=b"x" * (2 << 20)),  # 413 (body limit)
        registry.call("GET", "/healthz", role=None),
    ]
    for answer in answers:
        assert answer.headers.get("x-content-type-options") == "nosniff", answer.status_code


# ---------------------------------------------------------------- 6. look-alike text


def test_nfd_and_nfc_spellings_of_a_chunk_are_one_version(registry: LiveRegistry):
    """Item 6: an NFD copy of an NFC chunk became a new version, and the NFC text again
    another: three versions that read the same with different hashes."""
    slug = unique("nfc")
    nfc = chunk_content(slug, title="Café crème: vérifier le prix")
    nfd = {
        key: (
            [unicodedata.normalize("NFD", step) for step in value]
            if isinstance(value, list)
            else unicodedata.normalize("NFD", value)
        )
        for key, value in nfc.items()
    }
    assert nfd != nfc
    created = registry.ok(
        "POST", "/v1/chunks", role=Role.analyst, json={"slug": slug, "content": nfd}
    )
    assert created["latest"]["content"]["title"] == unicodedata.normalize("NFC", nfd["title"])
    chunk_id = created["id"]
    for content in (nfc, nfd):
        again = registry.call(
            "POST", f"/v1/chunks/{chunk_id}/versions", role=Role.analyst, json={"content": content}
        )
        assert again.status_code == 200, again.text  # unchanged: no new version
        assert again.json()["content_hash"] == created["latest"]["content_hash"]
    assert registry.ok("GET", f"/v1/chunks/{chunk_id}/versions")["total"] == 1


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\u2060", "\ufeff", "\u202e"])
def test_invisible_format_characters_in_a_title_are_refused(registry: LiveRegistry, invisible: str):
    """Item 6: a zero-width space in a title was stored as is (refused now, not stripped)."""
    slug = unique("zw")
    content = chunk_content(slug, title=f"Check{invisible} the price")
    response = registry.call(
        "POST", "/v1/chunks", role=Role.analyst, json={"slug": slug, "content": content}
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:3] == ["body", "content", "title"]
    bad_slug = registry.call(
        "POST",
        "/v1/chunks",
        role=Role.analyst,
        json={"slug": f"zw{invisible}{slug}", "content": chunk_content(slug)},
    )
    assert bad_slug.status_code == 422, bad_slug.text


# ---------------------------------------------------------------- 2. deeply nested JSON

MAX_DEPTH = 32  # docs/registry.md: free-form documents nest at most 32 levels


def document_text(levels: int, kind: str) -> bytes:
    """A free-form document (an object) nesting `levels` levels of objects or arrays in all."""
    if kind == "arrays":
        return b'{"k": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"
    return b'{"k": ' * (levels - 1) + b"{}" + b"}" * (levels - 1)


def card_body(field: str, document: bytes) -> bytes:
    head = b'{"round": 0, "task_id": "deep", "outcome": "NO_PROPOSAL", "eligible": false'
    return head + b', "' + field.encode() + b'": ' + document + b"}"


def post_raw(registry: LiveRegistry, body: bytes):
    return registry.call(
        "POST",
        "/v1/cards",
        role=Role.analyst,
        content=body,
        headers={"Content-Type": "application/json"},
    )


@pytest.mark.parametrize("field", ["extras", "privileged_audit"])
@pytest.mark.parametrize("kind", ["arrays", "objects"])
def test_free_form_json_past_the_depth_limit_is_a_422(
    registry: LiveRegistry, field: str, kind: str
):
    """Item 2: `extras` nested 255-256 deep answered 500 and dropped the connection, or was
    stored and then broke every audit page that held it; `privileged_audit` 256-400 deep was
    stored and its card's audit answered 500 for good."""
    at_limit = post_raw(registry, card_body(field, document_text(MAX_DEPTH, kind)))
    assert at_limit.status_code == 201, at_limit.text
    for levels in (MAX_DEPTH + 1, 64, 254, 255, 256, 400, 5_000, 100_000):
        response = post_raw(registry, card_body(field, document_text(levels, kind)))
        assert response.status_code == 422, (levels, response.status_code, response.text[:300])
        loc = response.json()["detail"][0]["loc"]
        assert loc[0] == "body" and loc[1:2] in ([], [field]), loc
    # Everything that reads the stored documents back still answers.
    card_id = at_limit.json()["id"]
    for path, params in (
        ("/v1/audit", {}),
        ("/v1/audit", {"object_type": "card", "object_id": card_id}),
        ("/v1/audit", {"actor": "analyst-bot"}),
        ("/v1/audit", {"action": "card.create"}),
        (f"/v1/cards/{card_id}", {}),
        (f"/v1/cards/{card_id}/audit", {}),
        ("/v1/cards", {"task_id": "deep"}),
    ):
        response = registry.call("GET", path, params=params)
        assert response.status_code == 200, (path, response.status_code)


def test_deep_nesting_in_a_typed_field_is_a_422_not_a_500(registry: LiveRegistry):
    """The body-wide limit: deep junk where a number belongs cannot reach the parser or the
    422 handler (which echoes the input) and crash them."""
    for levels in (100, 300, 5_000):
        body = b'{"round": ' + b"[" * levels + b"]" * levels + b', "task_id": "t"}'
        response = post_raw(registry, body)
        assert response.status_code == 422, (levels, response.status_code, response.text[:300])


# ---------------------------------------------------------------- issue 21: cards


def eligible_card(registry: LiveRegistry, task: str) -> int:
    body = {
        "round": 0,
        "task_id": task,
        "outcome": "ADD",
        "eligible": True,
        "deployable": {
            "failure_mechanism": "the query left out the budget",
            "applicable_when": "the task states a budget",
            "observable_trigger": "first-page prices above the budget",
            "corrective_procedure": "put the budget into the search query",
            "verification_step": "first-page prices are within the budget",
        },
    }
    return registry.ok("POST", "/v1/cards", role=Role.analyst, json=body)["id"]


def candidate(card_ids: list[int], round: int, tag: str) -> dict:
    return {
        "round": round,
        "operation": "ADD",
        "slug": unique(f"cand-{tag}"),
        "content": chunk_content(unique(tag)),
        "source_card_ids": card_ids,
    }


def test_a_card_backs_one_candidate_per_round(registry: LiveRegistry):
    """Issue 21, exactly-once: two candidates citing one card in one round were both stored."""
    card, other = eligible_card(registry, unique("t")), eligible_card(registry, unique("t"))
    first = registry.call(
        "POST", "/v1/candidates", role=Role.analyst, json=candidate([card], 0, "a")
    )
    assert first.status_code == 201, first.text
    again = registry.call(
        "POST", "/v1/candidates", role=Role.analyst, json=candidate([other, card], 0, "b")
    )
    assert again.status_code == 409, again.text
    assert str(first.json()["id"]) in again.json()["detail"]
    twice = registry.call(
        "POST", "/v1/candidates", role=Role.analyst, json=candidate([other, other], 0, "c")
    )
    assert twice.status_code == 422, twice.text
    # Another round may cite it again; the refused request above stored nothing for `other`.
    next_round = registry.call(
        "POST", "/v1/candidates", role=Role.analyst, json=candidate([card, other], 1, "d")
    )
    assert next_round.status_code == 201, next_round.text
    assert (
        registry.call(
            "POST", "/v1/candidates", role=Role.analyst, json=candidate([other], 0, "e")
        ).status_code
        == 201
    )


def test_racing_candidates_citing_one_card_store_exactly_one(registry: LiveRegistry):
    """Issue 21: the database key decides a race the service's own check cannot see."""
    card = eligible_card(registry, unique("t"))
    posts = [
        {
            "method": "POST",
            "url": "/v1/candidates",
            "json": candidate([card], 0, f"race{i}"),
            "headers": headers(Role.analyst),
        }
        for i in range(10)
    ]
    answers = concurrently(registry.url, posts)
    assert sorted(answer.status_code for answer in answers) == [201] + [409] * 9, [
        answer.text for answer in answers if answer.status_code not in (201, 409)
    ]


GOLD = "Sennheiser Momentum XM5"


def blocked_card(registry: LiveRegistry) -> dict:
    body = {
        "round": 0,
        "task_id": unique("gold"),
        "outcome": "ADD",
        "eligible": False,
        "deployable": {
            "failure_mechanism": "the agent never searched the brand",
            "applicable_when": "headphones",
            "observable_trigger": "no brand in the query",
            "corrective_procedure": f"search for {GOLD}",
            "verification_step": "the title names the brand",
        },
        "firewall_findings": [
            {"rule": "gold_title", "text": GOLD, "field": "corrective_procedure"}
        ],
    }
    response = registry.call("POST", "/v1/cards", role=Role.analyst, json=body)
    assert response.status_code == 201, response.text
    return response


def test_gold_the_firewall_found_is_read_only_in_the_privileged_audit(registry: LiveRegistry):
    """Issue 21: `CardPublic` showed `firewall_findings[].text` (the matched gold) and a blocked
    card's deployable text to the Reader role; so did the audit log."""
    created = blocked_card(registry)
    card_id = created.json()["id"]
    assert GOLD not in created.text
    for role in (Role.reader, Role.trainer, Role.evaluator, Role.analyst, Role.operator):
        for path, params in (
            (f"/v1/cards/{card_id}", {}),
            ("/v1/cards", {"task_id": created.json()["task_id"]}),
            ("/v1/audit", {"object_type": "card", "object_id": card_id}),
        ):
            response = registry.call("GET", path, role=role, params=params)
            assert response.status_code == 200, response.text
            assert GOLD not in response.text, (role, path)
    shown = registry.ok("GET", f"/v1/cards/{card_id}", role=Role.reader)
    assert [f["rule"] for f in shown["firewall_findings"]] == ["gold_title"]
    assert shown["deployable"] is None
    for role in (Role.reader, Role.trainer, Role.evaluator):
        assert registry.call("GET", f"/v1/cards/{card_id}/audit", role=role).status_code == 403
    audit = registry.ok("GET", f"/v1/cards/{card_id}/audit", role=Role.analyst)
    assert audit["firewall_findings"][0]["text"] == GOLD
    assert GOLD in audit["deployable"]["corrective_procedure"]
