"""Issue 22's input rules as pure functions (the live-server tests drive them over HTTP)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.registry.cards.gold import withhold_gold
from services.registry.paths import plain_decimal
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.aliases import is_protected
from shared.contracts.registry_api.schemas import MAX_JSON_DEPTH, CardCreate, Role, json_depth
from shared.kit.auth import TokenGrant, TokenTable, Unauthorized, hash_token
from shared.kit.request_body import nesting_depth


@pytest.mark.parametrize(
    "name",
    [
        "production",
        "production.",
        "Production",
        "pr0duction",
        "prod-uction",
        "productl0n",
        "product1on",
        "productlon",
        "procluction",
        "pr0ductl0n",
        "PRODUCTlON",
    ],
)
def test_look_alikes_of_production_are_protected(name):
    # 1 i I l | read as one stroke, 0 o O as one round, cl as d, rn as m (issue 28, item 6)
    assert is_protected(name, ["production"])


@pytest.mark.parametrize("name", ["production-v2", "staging", "current", "prod"])
def test_other_names_are_not_protected(name):
    assert not is_protected(name, ["production"])


def test_a_revoked_listing_wins_whatever_the_order():
    token = "t0ken"
    for revoked_first in (True, False):
        grants = [
            TokenGrant(name="bot", role=Role.operator, token_sha256=hash_token(token), revoked=r)
            for r in ((True, False) if revoked_first else (False, True))
        ]
        with pytest.raises(Unauthorized):
            TokenTable(grants).authenticate(f"Bearer {token}")


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b"{}", 0),  # too few brackets to reach the limit: not scanned
        (b"[[[]]]", 3),
        (b'{"a": "[[[[[["}', 1),
        (b'{"a": "\\"[[[[", "b": [[[]]]}', 4),
        (b"[" * 100_000, 100_000),
    ],
)
def test_nesting_depth_skips_strings(body, depth):
    assert nesting_depth(body, limit=1 if depth else 5) == depth


def test_json_depth_needs_no_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert json_depth({"k": deep}) == 100_002
    assert json_depth(3) == 0 and json_depth({}) == 1


def free_form(levels: int) -> dict:
    document: dict = {}
    for _ in range(levels - 1):
        document = {"k": document}
    return document


def test_free_form_documents_nest_at_most_the_limit():
    base = {"round": 0, "task_id": "t", "outcome": "NO_PROPOSAL", "eligible": False}
    CardCreate.model_validate({**base, "extras": free_form(MAX_JSON_DEPTH)})
    with pytest.raises(ValidationError) as error:
        CardCreate.model_validate({**base, "privileged_audit": free_form(MAX_JSON_DEPTH + 1)})
    assert error.value.errors()[0]["loc"] == ("privileged_audit",)


@pytest.mark.parametrize("spelling", ["+1", "01", " 1", "1 ", "1.0", "0x1", "١"])
def test_ids_are_plain_decimal(spelling):
    with pytest.raises(ValueError):
        plain_decimal(spelling)
    assert plain_decimal("10") == "10" and plain_decimal("0") == "0"


def test_chunk_text_is_nfc_and_titles_have_no_invisible_characters():
    fields = {"applies_when": "w", "procedure": ["p"], "verify": "v", "avoid": "a"}
    nfd = ChunkContent(title="Cafe\u0301", **fields)
    assert nfd.title == "Caf\u00e9"
    assert nfd.content_hash() == ChunkContent(title="Caf\u00e9", **fields).content_hash()
    with pytest.raises(ValidationError):
        ChunkContent(title="Check\u200bprice", **fields)


def test_gold_is_withheld_from_a_card_document():
    card = {
        "deployable": {"corrective_procedure": "search Acme X5"},
        "firewall_findings": [{"rule": "gold_brand", "text": "Acme", "field": "procedure"}],
    }
    shown = withhold_gold(card)
    assert shown["deployable"] is None and "Acme" not in str(shown)
    assert shown["firewall_findings"][0]["rule"] == "gold_brand"
    clean = {"deployable": {"corrective_procedure": "x"}, "firewall_findings": []}
    assert withhold_gold(clean) == clean
