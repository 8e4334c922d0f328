"""The compiler's rules: merge by mechanism, cite every card once, <= 6, dedupe, firewall."""

import pytest

from services.analyst.cards import finish_card
from services.analyst.compiler import candidate_problem, compile_round, signature
from services.analyst.mechanisms import LIBRARY, WORKFLOW
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import (
    CandidateCreate,
    CandidateOperation,
    CardOutcome,
    DeployableAbstraction,
)
from shared.runtime.leak import GoldFacts
from tests.analyst.support import entry, library_bank, paired

SUCCESS = paired(with_card=[True], without_card=[False])


def card(
    mechanism,
    *,
    target=None,
    content=None,
    outcome=CardOutcome.ADD,
    trigger=None,
    gold=None,
    active=None,
):
    template = LIBRARY[mechanism]
    proposed = content or template.template
    deployable = DeployableAbstraction(
        failure_mechanism=template.failure_surface,
        applicable_when=proposed.applies_when,
        observable_trigger=trigger or template.trigger,
        corrective_procedure=" ".join(proposed.procedure),
        verification_step=proposed.verify,
        target_chunk_id=target,
        proposed_content=proposed,
    )
    return finish_card(
        round=1, task_id="task-000001", checkpoint_id=None, evidence_id=None, outcome=outcome,
        audit={"firewall_gold": (gold or GoldFacts()).as_json()}, deployable=deployable,
        gold=None, verification=SUCCESS, active=active or library_bank("explicit_query"),
        cold_start=False,
        extras={"mechanism": mechanism},
    )  # fmt: skip


def numbered(cards):
    return list(enumerate(cards, start=1))


def cited(result):
    ids = [i for candidate in result.candidates for i in candidate.card_ids]
    return ids + result.evidence_only


def test_merges_many_to_one_by_mechanism_and_cites_each_card_once():
    cards = numbered([card("price_check"), card("option_choice"), card("price_check")])
    result = compile_round(cards, active=[])
    assert [(c.mechanism, c.card_ids) for c in result.candidates] == [
        ("price_check", (1, 3)),  # best supported first
        ("option_choice", (2,)),
    ]
    assert sorted(cited(result)) == [1, 2, 3]
    assert result.candidates[0].operation == "ADD" and result.candidates[0].target_chunk_id is None


def test_equal_support_ranks_in_workflow_order_not_by_name():
    # persona comes before candidate inspection in an episode, though not alphabetically
    cards = numbered([card("inspect_candidates"), card("persona_constraints")])
    result = compile_round(cards, active=[])
    assert [c.mechanism for c in result.candidates] == ["persona_constraints", "inspect_candidates"]
    kept = compile_round(cards, active=[], max_candidates=1)
    assert [c.mechanism for c in kept.candidates] == ["persona_constraints"]


def test_same_mechanism_with_another_trigger_stays_apart():
    cart = LIBRARY["price_check"].template.model_copy(update={"title": "Price check in the cart"})
    other = card("price_check", trigger="the cart shows a total", content=cart)
    result = compile_round(numbered([card("price_check"), other]), active=[])
    assert len(result.candidates) == 2
    # Same trigger and procedure but the same text again: one candidate, one evidence-only.
    twice = compile_round(numbered([card("price_check"), card("price_check")]), active=[])
    assert [c.card_ids for c in twice.candidates] == [(1, 2)]


def test_at_most_six_candidates_rest_evidence_only():
    other = ChunkContent(title="Seventh idea", applies_when="a", procedure=["b"], verify="c",
                         avoid="d")  # fmt: skip
    cards = [card(key) for key in WORKFLOW] + [card("price_check", content=other, trigger="x")]
    result = compile_round(numbered(cards), active=[])
    assert len(result.candidates) == 6
    assert len(result.evidence_only) == 1
    assert sorted(cited(result)) == list(range(1, 8))
    tight = compile_round(numbered(cards), active=[], max_candidates=2)
    assert len(tight.candidates) == 2 and len(tight.evidence_only) == 5
    assert all("over the budget" in drop["reason"] for drop in tight.dropped)


def test_rewrite_must_target_an_active_chunk():
    active = library_bank("explicit_query")  # chunk id 1
    better = ChunkContent(title="Search query: all explicit constraint words", applies_when="a",
                          procedure=["b"], verify="c", avoid="d")  # fmt: skip
    good = card("explicit_query", target=1, content=better, outcome=CardOutcome.REWRITE)
    stale = card("option_choice", target=5, outcome=CardOutcome.REWRITE)
    assert not stale.eligible  # forced NO_PROPOSAL: target not active
    result = compile_round(numbered([good, stale]), active=active)
    assert [(c.operation, c.target_chunk_id) for c in result.candidates] == [("REWRITE", 1)]
    assert result.evidence_only == []  # ineligible cards are not compiled at all
    # A target active when the card was written but not in the bank being compiled against.
    retired = card("option_choice", target=2, outcome=CardOutcome.REWRITE,
                   active=library_bank("explicit_query", "option_choice"))  # fmt: skip
    assert retired.eligible
    late = compile_round(numbered([retired]), active=active)
    assert late.candidates == [] and late.evidence_only == [1]
    assert "not an active chunk" in late.dropped[0]["reason"]


def test_fingerprint_dedupe_against_active_bank_and_history():
    active = library_bank("explicit_query")
    content = LIBRARY["price_check"].template
    history = [(signature("ADD", None, content), content)]
    cards = numbered([card("explicit_query"), card("price_check"), card("option_choice")])
    result = compile_round(cards, active=active, history=history)
    assert [c.mechanism for c in result.candidates] == ["option_choice"]
    assert sorted(result.evidence_only) == [1, 2]


def test_the_fingerprint_is_the_registrys():
    # the dedupe compares with signatures the registry stored: both must be one function
    content = LIBRARY["price_check"].template
    for operation, target in (("ADD", None), ("REWRITE", 4)):
        stored = CandidateCreate(
            round=0, operation=CandidateOperation(operation), target_chunk_id=target,
            content=content, source_card_ids=[1],
        )  # fmt: skip
        assert signature(operation, target, content) == stored.signature()
    assert signature("ADD", None, content) != signature("REWRITE", None, content)


def test_an_add_names_no_target():
    content = LIBRARY["price_check"].template
    assert candidate_problem("ADD", 3, content, [], {3}) == "an ADD names no target"
    assert candidate_problem("ADD", None, content, [], {3}) is None
    assert candidate_problem("REWRITE", 3, content, [], {3}) is None


def test_candidate_text_passes_each_cards_firewall():
    gold = GoldFacts(gold_options=("charcoal gray",))
    leaky = ChunkContent(title="Option values: pick charcoal gray", applies_when="a",
                         procedure=["b"], verify="c", avoid="d")  # fmt: skip
    result = compile_round(numbered([card("option_choice", content=leaky, gold=gold)]), active=[])
    assert result.candidates == [] and result.evidence_only == [1]
    assert "firewall" in result.dropped[0]["reason"]


def test_candidate_text_passes_the_firewall_of_every_card_not_only_the_first():
    gold = GoldFacts(gold_options=("charcoal gray",))
    leaky = ChunkContent(title="Option values: pick charcoal gray", applies_when="a",
                         procedure=["b"], verify="c", avoid="d")  # fmt: skip
    clean_first = card("option_choice", content=leaky)  # no gold of its own
    result = compile_round(
        numbered([clean_first, card("option_choice", content=leaky, gold=gold)]), active=[]
    )
    assert result.candidates == [] and sorted(result.evidence_only) == [1, 2]


def everything_alike(text, others):
    """A TEST DOUBLE of the embedding similarity: every earlier text is a near duplicate."""
    return (0, 0.99) if others else None


def test_a_rewrite_is_never_deduplicated_against_the_text_it_rewrites():
    active = library_bank("explicit_query", "price_check")  # chunk ids 1, 2
    target = active[0].content
    fuller = target.model_copy(
        update={"applies_when": target.applies_when + " Also when the profile adds some.",
                "procedure": [*target.procedure, "Add the profile's required attributes."]}
    )  # fmt: skip
    rewrite = card("explicit_query", target=1, content=fuller, outcome=CardOutcome.REWRITE,
                   active=active)  # fmt: skip
    # the target's text is also in the history: it was itself a candidate once
    history = [(signature("ADD", None, target), target)]
    alone = compile_round(numbered([rewrite]), active=active[:1], history=history,
                          similar=everything_alike)  # fmt: skip
    assert [(c.operation, c.target_chunk_id) for c in alone.candidates] == [("REWRITE", 1)]
    # against any other text (another active chunk, an earlier candidate) it is still compared
    beside = compile_round(numbered([rewrite]), active=active, similar=everything_alike)
    assert beside.candidates == [] and "semantic duplicate" in beside.dropped[0]["reason"]
    add = compile_round(numbered([card("price_check", content=fuller)]), active=active[:1],
                        similar=everything_alike)  # fmt: skip
    assert add.candidates == []  # an ADD is compared with every active chunk


@pytest.mark.slow
def test_minilm_keeps_a_rewrite_that_adds_a_condition_and_a_step():
    from services.analyst.embeddings import most_similar

    active = library_bank("explicit_query")
    target = active[0].content
    fuller = target.model_copy(
        update={"applies_when": target.applies_when + " Also when the profile adds some.",
                "procedure": [*target.procedure, "Add the profile's required attributes."]}
    )  # fmt: skip
    rewrite = card("explicit_query", target=1, content=fuller, outcome=CardOutcome.REWRITE,
                   active=active)  # fmt: skip
    result = compile_round(numbered([rewrite]), active=active, similar=most_similar)
    assert [(c.operation, c.target_chunk_id) for c in result.candidates] == [("REWRITE", 1)]


@pytest.mark.slow
def test_semantic_duplicate_of_an_active_chunk_is_dropped():
    from services.analyst.embeddings import most_similar

    template = LIBRARY["price_check"].template
    reworded = template.model_copy(
        update={"procedure": ["Once options are chosen, read the price shown for the selection.",
                              "When it is above the budget, go back and try the next result."]}
    )  # fmt: skip
    result = compile_round(
        numbered([card("price_check", content=reworded), card("option_choice")]),
        active=library_bank("price_check"),
        similar=most_similar,
    )
    assert [c.mechanism for c in result.candidates] == ["option_choice"]
    assert "semantic duplicate" in result.dropped[0]["reason"]


def test_a_rewrite_is_never_deduplicated_against_any_earlier_version_of_its_target():
    # chunk 1 began as an ADD candidate (v1, in the history), was rewritten to v2 (active);
    # a third text for it reads like both (everything alike here) and must still be proposed
    first = LIBRARY["explicit_query"].template
    current = first.model_copy(update={"avoid": first.avoid + " Do not drop the budget."})
    third = current.model_copy(update={"verify": current.verify + " Check the brand too."})
    active = [entry(1, current)]
    history = [(signature("ADD", None, first), first)]
    rewrite = card("explicit_query", target=1, content=third, outcome=CardOutcome.REWRITE,
                   active=active)  # fmt: skip
    kept = compile_round(numbered([rewrite]), active=active, history=history,
                         similar=everything_alike, versions={1: [first, current]})  # fmt: skip
    assert [(c.operation, c.target_chunk_id) for c in kept.candidates] == [("REWRITE", 1)]
    # an earlier candidate that is no version of chunk 1 still counts as a duplicate
    other = LIBRARY["price_check"].template
    history.append((signature("ADD", None, other), other))
    dropped = compile_round(numbered([rewrite]), active=active, history=history,
                            similar=everything_alike, versions={1: [first, current]})  # fmt: skip
    assert dropped.candidates == [] and "semantic duplicate" in dropped.dropped[0]["reason"]
