"""The rules failure analyst: diagnosis against gold, the counterfactual test of the card's own
repair, card rules."""

import pytest

from services.analyst.cards import finish_card, forced_no_proposal_reason
from services.analyst.counterfactual_trials import bank_chunks as injected
from services.analyst.mechanisms import LIBRARY, WORKFLOW, addressed_mechanisms
from services.analyst.rules_backend import AnalysisInput, analyze, proposal_chunk
from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.contracts.hashing import content_hash
from shared.contracts.registry_api.schemas import CardOutcome, DeployableAbstraction
from shared.runtime.agent.backends.procedural import MECHANISMS, recognised_mechanisms
from shared.runtime.agent.prompts import DEFAULT_LAYOUT, get_layout
from shared.runtime.leak import GoldFacts
from tests.analyst.support import (
    entry,
    failed_traces,
    library_bank,
    paired,
    small_env,
    succeeds_with,
)


@pytest.fixture(scope="module")
def env():
    return small_env()


@pytest.fixture(scope="module")
def naive_failures(env):
    return failed_traces(env)


def test_every_template_is_followed_by_the_tester_and_names_its_mechanism():
    # Contract between the repair library and the procedural live tester.
    assert set(LIBRARY) == set(MECHANISMS) == set(WORKFLOW)
    for key, mechanism in LIBRARY.items():
        block = render_skill_block(injected(library_bank(key)))
        assert recognised_mechanisms(block) == {key}
        assert key in addressed_mechanisms(mechanism.template)


def block_hash(contents) -> str:
    """The skill block hash of a default-layout prompt carrying these chunk versions."""
    layout = get_layout(DEFAULT_LAYOUT)
    chunks = [InjectedChunk(chunk_id=slug, version=v, content=c) for slug, v, c in contents]
    block = render_skill_block(chunks, header=layout.skill_header, caveat=layout.skill_caveat)
    return content_hash(block)


@pytest.fixture(scope="module")
def query_fixed(env, naive_failures):
    """Naive failures the query chunk alone repairs, and those it alone does not."""
    query = [proposal_chunk("explicit_query")]
    fixed = [t for t in naive_failures if succeeds_with(env, t, query)]
    unfixed = [t for t in naive_failures if not succeeds_with(env, t, query)]
    assert fixed and unfixed
    return fixed, unfixed


def test_naive_failure_gets_a_query_card_verified_by_its_own_repair(env, query_fixed):
    trace = query_fixed[0][0]
    card = analyze(AnalysisInput(env=env, trajectory=trace, bank=[], round=0, seed=1))
    task = env.task(trace.task_id)
    assert card.outcome == CardOutcome.ADD and card.eligible
    assert card.extras["mechanism"] == "explicit_query"  # the naive query names the noun only
    audit = card.privileged_audit
    assert audit["gold_asin"] == task.gold_asin
    assert audit["earliest_divergence"]["step"] == 0
    # the slip-0 tester shops naively without the card on every seed, and with it succeeds
    checked = {"with": 4, "without": 0, "k": 4, "seeds": [1, 2, 3, 4], "verified": True}
    assert checked.items() <= card.extras["verification"].items()
    assert checked.items() <= audit["repair_validation_result"].items()
    trial = card.extras["terminal_trials"][0]
    assert trial["arm"] == "with" and trial["seed"] == 1
    assert trial["success"] and trial["replay_faithful"] and trial["branch_step"] == 0
    # the verifying trial, as the card records it: the prompt carried the card's own chunk
    template = LIBRARY["explicit_query"].template
    assert card.extras["verifying_trial"] == {
        "branch_step": 0,
        "prompt_hash": block_hash([("card-proposal", 1, template)]),
        "agent": "procedural-test-double:live-tester",
        "seed": 1,
        "reward": trial["reward"],
        "termination": "purchase",
        "outcome": "success",
    }
    # The deployable part is the library template: no gold reached it.
    assert card.deployable.proposed_content == LIBRARY["explicit_query"].template
    assert card.firewall_findings == []
    assert task.gold_asin not in card.deployable.model_dump_json()


def test_a_card_is_verified_by_its_own_repair_alone_not_a_chain(env, query_fixed):
    # the query chunk alone does not repair these; a chain of further repairs may, but the
    # card proposes the query chunk only, so it is not verified
    cards = [
        analyze(AnalysisInput(env=env, trajectory=trace, bank=[], round=0, seed=1))
        for trace in query_fixed[1][:4]
    ]
    query_cards = [card for card in cards if card.extras.get("mechanism") == "explicit_query"]
    assert query_cards
    for card in query_cards:
        assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
        assert "reached R_success = 1" in card.forced_no_proposal_reason
        assert card.extras["verifying_trial"] is None
        assert card.extras["verification"]["with"] == 0
        trials = card.extras["terminal_trials"]  # k with the card's own chunk, k without
        assert [t["arm"] for t in trials] == ["with"] * 4 + ["without"] * 4


def test_cards_are_deterministic(env, naive_failures):
    trace = naive_failures[1]
    first = analyze(AnalysisInput(env=env, trajectory=trace, bank=[], round=0, seed=3))
    again = analyze(AnalysisInput(env=env, trajectory=trace, bank=[], round=0, seed=3))
    assert first == again


def test_later_mechanisms_are_found_once_the_query_is_covered(env):
    bank = library_bank("explicit_query", "persona_constraints")
    failures = failed_traces(env, injected(bank))
    mechanisms = {
        analyze(AnalysisInput(env=env, trajectory=t, bank=bank, round=1, seed=0)).extras.get(
            "mechanism"
        )
        for t in failures
    }
    assert mechanisms - {None} <= set(WORKFLOW) - {"explicit_query", "persona_constraints"}
    assert len(mechanisms - {None}) >= 2


def test_unfollowed_chunk_on_the_same_mechanism_is_rewritten(env, query_fixed):
    vague = ChunkContent(
        title="Writing the query",
        applies_when="Always.",
        procedure=["Think about the query and its attributes."],
        verify="Results look relevant.",
        avoid="Bad queries.",
    )
    bank = [entry(7, vague)]
    trace = query_fixed[0][0]
    card = analyze(AnalysisInput(env=env, trajectory=trace, bank=bank, round=1, seed=1))
    assert card.outcome == CardOutcome.REWRITE
    assert card.deployable.target_chunk_id == 7
    # the trial's prompt had the new text in the target's slot, not beside the old one
    (trial, *_) = card.extras["terminal_trials"]
    template = LIBRARY["explicit_query"].template
    assert trial["prompt_hash"] == block_hash([("chunk-7", 2, template)])
    # and the paired continuation without it had the old text in that slot
    without = next(t for t in card.extras["terminal_trials"] if t["arm"] == "without")
    assert without["prompt_hash"] == block_hash([("chunk-7", 1, vague)])
    cold = analyze(
        AnalysisInput(env=env, trajectory=trace, bank=bank, round=0, seed=1, cold_start=True)
    )
    assert cold.outcome == CardOutcome.ADD  # no REWRITE at cold start


def test_a_bank_that_already_covers_the_failure_proposes_nothing(env):
    bank = library_bank(*WORKFLOW)
    failures = failed_traces(env, injected(bank), slip=1.0, n=20)  # random clicks
    cards = [analyze(AnalysisInput(env=env, trajectory=t, bank=bank, round=2)) for t in failures]
    assert cards and all(card.outcome == CardOutcome.NO_PROPOSAL for card in cards)


def _deployable(text="Check the price.", target=None):
    return DeployableAbstraction(
        failure_mechanism="m",
        applicable_when="w",
        observable_trigger="t",
        corrective_procedure=text,
        verification_step="v",
        target_chunk_id=target,
        proposed_content=LIBRARY["price_check"].template,
    )


SUCCESS = paired(with_card=[True, False], without_card=[False, False])


@pytest.mark.parametrize(
    ("outcome", "verification", "target", "cold", "reason"),
    [
        (CardOutcome.ADD, paired([False], [False], valid_actions=0), None, False, "no valid"),
        (CardOutcome.ADD, paired([False, False], [True, False]), None, False, "R_success"),
        (CardOutcome.ADD, None, None, False, "no counterfactual trial"),
        # as many successes without the card as with it: the repair did not do it
        (CardOutcome.ADD, paired([True, True], [True, True]), None, False, "did not beat"),
        (CardOutcome.ADD, paired([True, False], [False, True]), None, False, "did not beat"),
        (CardOutcome.REWRITE, SUCCESS, 1, True, "cold start"),
        (CardOutcome.REWRITE, SUCCESS, 99, False, "not an active chunk"),
        (CardOutcome.REWRITE, SUCCESS, 1, False, None),
        (CardOutcome.ADD, SUCCESS, None, False, None),
    ],
)
def test_forced_no_proposal_rules(outcome, verification, target, cold, reason):
    active = library_bank("price_check")  # chunk id 1
    found = forced_no_proposal_reason(
        outcome=outcome,
        verification=verification,
        target_chunk_id=target,
        active=active,
        cold_start=cold,
        findings=[],
    )
    assert (found is None) if reason is None else (reason in found)


def test_firewall_hit_forces_no_proposal():
    gold = GoldFacts(goal_title="Sabel Vista TK994 hair dryer", brands_seen=("Sabel",))
    card = finish_card(
        round=0,
        task_id="task-000001",
        checkpoint_id=None,
        evidence_id=None,
        outcome=CardOutcome.ADD,
        audit={},
        deployable=_deployable("Prefer Sabel when unsure."),
        gold=gold,
        verification=SUCCESS,
        active=[],
        cold_start=False,
        extras={},
    )
    assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
    assert card.forced_no_proposal_reason.startswith("gold firewall")
    assert {(f.rule, f.field) for f in card.firewall_findings} == {
        ("gold_brand", "corrective_procedure")
    }
