"""The llm compiler over real HTTP against the recorded-response server (a TEST DOUBLE of an
OpenAI-compatible chat model): what it is shown (deployable parts only), a valid merge
accepted, each rule violation sent back and repaired, the deterministic fallback after the
bounded attempts, and the same dedupe as the deterministic compiler."""

import json

import pytest

from services.analyst.compiler import compile_round, signature
from services.analyst.deps import compiler_named
from services.analyst.llm_compiler import LLMCompiler
from services.analyst.mechanisms import LIBRARY, WORKFLOW
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import _compiler_label
from shared.contracts.analyst_api.schemas import CompileRoundCreate
from shared.contracts.chunks import ChunkContent
from shared.runtime.leak import GoldFacts
from tests.analyst.recorded_chat_server import recorded_chat_server
from tests.analyst.support import library_bank
from tests.analyst.test_compiler import card, numbered

GOLD = GoldFacts(brands_seen=("Zentrix",), gold_options=("charcoal gray",),
                 product_ids=("B0ZZZZZZZ1",))  # fmt: skip


def reply(answer: dict) -> dict:
    """One recorded assistant message answering the JSON."""
    return {"role": "assistant", "content": json.dumps(answer)}


def candidate(mechanism, card_ids, *, outcome="ADD", target=None, content=None) -> dict:
    chunk = content or LIBRARY[mechanism].template
    return {"outcome": outcome, "target_chunk_id": target, "mechanism": mechanism,
            "content": chunk.model_dump(mode="json"), "card_ids": card_ids}  # fmt: skip


def round_cards():
    """Cards 1 and 3 share the price mechanism; card 2 is about option values."""
    return numbered([card("price_check", gold=GOLD), card("option_choice", gold=GOLD),
                     card("price_check", gold=GOLD)])  # fmt: skip


# The model's merge: both price cards in one candidate, the option card on its own.
VALID = {"candidates": [candidate("price_check", [1, 3]), candidate("option_choice", [2])]}


def compile_with(script, *, repairs=2, cards=None, **options):
    with recorded_chat_server(script) as (url, received):
        compiler = LLMCompiler(url, "recorded-test-double", repairs=repairs)
        try:
            result = compiler.compile(cards or round_cards(), active=library_bank(), **options)
        finally:
            compiler.close()
    return result, received


def test_valid_merge_is_accepted_and_the_model_sees_deployable_parts_only():
    result, received = compile_with([reply(VALID)])
    assert [(c.mechanism, c.card_ids) for c in result.candidates] == [
        ("price_check", (1, 3)),
        ("option_choice", (2,)),
    ]
    assert result.report["used"] == "llm" and not result.report["fell_back"]
    assert result.report["attempts"] == 1 and len(received) == 1
    body = received[0]
    assert body["response_format"]["type"] == "json_schema"
    sent = json.dumps(body)
    assert "firewall_gold" not in sent and "privileged_audit" not in sent
    for secret in ("Zentrix", "charcoal gray", "B0ZZZZZZZ1", "task-000001"):
        assert secret not in sent
    assert LIBRARY["price_check"].template.title in sent  # the deployable part is there


def test_an_uncited_card_becomes_evidence_only():
    only_price = {"candidates": [candidate("price_check", [1, 3])], "evidence_only": []}
    result, _ = compile_with([reply(only_price)])
    assert [c.card_ids for c in result.candidates] == [(1, 3)]
    assert result.evidence_only == [2]


SEVEN = [candidate(key, [i + 1]) for i, key in enumerate(WORKFLOW)] + [
    candidate("price_check", [7], content=ChunkContent(title="Seventh idea", applies_when="a",
                                                       procedure=["b"], verify="c", avoid="d"))
]  # fmt: skip
LEAKY = LIBRARY["price_check"].template.model_copy(
    update={"title": "Price check: compare with B0ZZZZZZZ1"}
)
VIOLATIONS = {
    "card cited twice": (
        {"candidates": [candidate("price_check", [1, 3]), candidate("option_choice", [2, 3])]},
        "cited more than once",
    ),
    "seven candidates": ({"candidates": SEVEN}, "at most 6"),
    "REWRITE of an inactive chunk": (
        {"candidates": [candidate("price_check", [1, 2, 3], outcome="REWRITE", target=9)]},
        "not an active chunk",
    ),
    "leaked product id": (
        {
            "candidates": [
                candidate("price_check", [1, 3], content=LEAKY),
                candidate("option_choice", [2]),
            ]
        },
        "gold firewall: product_id",
    ),
    "ADD with a target": (
        {"candidates": [candidate("price_check", [1, 2, 3], target=1)]},
        "an ADD names no target",
    ),
    "not JSON of the schema": ({"merged": []}, "candidates"),
}


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_a_rule_violation_is_sent_back_and_repaired(name):
    broken, rule = VIOLATIONS[name]
    cards = numbered([card(key, gold=GOLD) for key in WORKFLOW] + [card("price_check")])
    if name != "seven candidates":
        cards = round_cards()
    result, received = compile_with([reply(broken), reply(VALID)], cards=cards, max_candidates=6)
    repair_request = received[1]["messages"][-1]["content"]
    assert rule in repair_request, repair_request
    assert rule in result.report["errors"][0]
    assert result.report["used"] == "llm" and result.report["attempts"] == 2
    assert [c.card_ids for c in result.candidates] == [(1, 3), (2,)]


def test_fallback_to_the_deterministic_compiler_after_the_bounded_attempts():
    broken = VIOLATIONS["card cited twice"][0]
    result, received = compile_with([reply(broken)] * 5, repairs=2)
    assert len(received) == 3  # one answer and two repairs, no more
    assert result.report["used"] == "deterministic" and result.report["fell_back"]
    assert len(result.report["errors"]) == 3
    expected = compile_round(round_cards(), active=library_bank())
    assert result.candidates == expected.candidates
    assert _compiler_label(result.report) == "llm->deterministic"


def test_a_model_that_answers_prose_or_is_unreachable_falls_back_without_a_crash():
    result, received = compile_with([], repairs=1)  # past the script: plain prose
    assert len(received) == 2 and result.report["fell_back"]
    down = LLMCompiler("http://127.0.0.1:9/v1", "nobody", repairs=0, timeout_s=2)
    fallback = down.compile(round_cards(), active=[])
    assert fallback.report["fell_back"] and "chat failed" in fallback.report["errors"][0]
    assert len(fallback.candidates) == 2


def test_its_candidates_go_through_the_same_fingerprint_dedupe():
    content = LIBRARY["price_check"].template
    history = [(signature("ADD", None, content), content)]
    result, _ = compile_with([reply(VALID)], history=history)
    assert [c.mechanism for c in result.candidates] == ["option_choice"]
    assert sorted(result.evidence_only) == [1, 3]
    assert "fingerprint" in result.dropped[0]["reason"]


def test_the_backend_is_chosen_by_the_compile_request():
    assert CompileRoundCreate.model_fields["compiler_backend"].default == "deterministic"
    assert compiler_named("deterministic", AnalystSettings()) is compile_round
    settings = AnalystSettings(llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    chosen = compiler_named("llm", settings)
    assert isinstance(chosen.__self__, LLMCompiler)
    assert chosen.__self__.repairs == settings.llm_compiler_repairs
    with pytest.raises(LookupError):
        compiler_named("llm", AnalystSettings(llm_base_url=None, llm_model=None))
