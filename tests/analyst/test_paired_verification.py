"""Paired counterfactual verification (`services/analyst/counterfactual_trials.py`): k
continuations from the replayed branch with the card's repair and k without it, on the same
seeds, with their own turn budget; verified = at least one success with the repair and more with
than without. The blind agents here are TEST DOUBLES: the procedural policy (it follows the
chunks whose titles it recognises, and with `competence` it shops well unprompted) and `Dawdler`
below."""

import pytest

from services.analyst.cards import finish_card
from services.analyst.counterfactual_trials import continuations, repaired_bank, verify_repair
from services.analyst.mechanisms import LIBRARY
from services.analyst.rules_backend import AnalysisInput, analyze
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import CardOutcome, DeployableAbstraction
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.backends.procedural import action_output
from shared.runtime.agent.runner import RolloutConfig
from tests.analyst.support import failed_traces, small_env

HOLLOW = ChunkContent(
    title="Try harder.",
    applies_when="Always.",
    procedure=["Try harder."],
    verify="You tried harder.",
    avoid="Giving up.",
)


@pytest.fixture(scope="module")
def env():
    return small_env()


@pytest.fixture(scope="module")
def failures(env):
    return failed_traces(env, n=30)


def competent_agent():
    """A TEST DOUBLE that shops well unprompted half the time (per episode and mechanism)."""
    return make_backend("procedural", "competent", slip=0.0, competence=0.5)


def check_at_start(env, trace, content, agent):
    """The paired check of `content` from the first step of `trace`, k = 4 on seeds 7..10."""
    return verify_repair(env, trace, [], content, target_chunk_id=None, branch_step=0,
                         agent=agent, seed=7, k=4)  # fmt: skip


def deployable(content: ChunkContent) -> DeployableAbstraction:
    return DeployableAbstraction(
        failure_mechanism="the agent gave up",
        applicable_when=content.applies_when,
        observable_trigger="always",
        corrective_procedure=" ".join(content.procedure),
        verification_step=content.verify,
        proposed_content=content,
    )


def card_of(verification, content=HOLLOW):
    return finish_card(
        round=0, task_id="task-000001", checkpoint_id=None, evidence_id=None,
        outcome=CardOutcome.ADD, audit={}, deployable=deployable(content), gold=None,
        verification=verification, active=[], cold_start=False, extras={},
    )  # fmt: skip


def test_a_hollow_card_does_not_verify_when_the_agent_succeeds_as_often_without_it(env, failures):
    # An agent that sometimes succeeds on its own from the branch: with one or a few tries and
    # no arm without the card, "Try harder." would pass on luck and the agent's competence.
    agent = competent_agent()
    checks = [check_at_start(env, trace, HOLLOW, agent) for trace in failures[:12]]
    lucky = [check for check in checks if check.with_successes >= 1]
    assert lucky, "the competent test double must succeed on some branch for this test to bite"
    for check in checks:
        # same seeds pairwise: the card changes nothing this agent reads, so nothing differs
        assert [t.seed for t in check.with_trials] == [t.seed for t in check.without_trials]
        assert [t.success for t in check.with_trials] == [t.success for t in check.without_trials]
        assert not check.verified
    for check in lucky:
        card = card_of(check)
        assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
        assert "did not beat its absence" in card.forced_no_proposal_reason
        assert card.extras["verification"]["with"] == card.extras["verification"]["without"] >= 1
        assert card.extras["verifying_trial"] is None


def test_a_real_repair_verifies_against_the_same_agent_without_it(env, failures):
    # The query chunk switches on a mechanism the competent double follows only half the
    # time unprompted: on some failure it must win more seeds with the card than without.
    agent = competent_agent()
    query = LIBRARY["explicit_query"].template
    checks = [check_at_start(env, trace, query, agent) for trace in failures[:12]]
    verified = [check for check in checks if check.verified]
    assert verified
    for check in verified:
        assert check.with_successes > check.without_successes
        card = card_of(check, query)
        assert card.eligible and card.outcome == CardOutcome.ADD
        stored = card.extras["verification"]
        assert stored["k"] == 4 and stored["seeds"] == [7, 8, 9, 10] and stored["verified"]
        assert (stored["with"], stored["without"]) == (
            check.with_successes,
            check.without_successes,
        )
        arms = [t["arm"] for t in card.extras["terminal_trials"]]
        assert arms == ["with"] * 4 + ["without"] * 4


def test_the_analysts_card_carries_both_counts_k_and_the_seeds(env, failures):
    card = analyze(AnalysisInput(env=env, trajectory=failures[0], bank=[], round=0, seed=5,
                                 pairs=3, verifier=competent_agent()))  # fmt: skip
    stored = card.extras["verification"]
    assert stored["k"] == 3 and stored["seeds"] == [5, 6, 7]
    assert {"with", "without", "branch_step", "agent", "verified"} <= set(stored)
    assert card.eligible == (stored["with"] >= 1 and stored["with"] > stored["without"])


class Dawdler:
    """A TEST DOUBLE of a policy that never buys: it clicks an id no page offers, every turn
    (an invalid action consumes a step), so an episode runs until its turn cap."""

    name, model_id, checkpoint_id, renderer, stream = "dawdler", "dawdler", "dawdler", None, None

    def generate(self, requests, decoding):
        return [action_output("click[nowhere]", tools=r.tools is not None) for r in requests]

    def release(self, key):
        pass

    def close(self):
        pass


def test_the_continuation_gets_its_own_turn_budget_after_the_branch(env, failures):
    retry = next(trace for trace in failures if len(trace.steps) >= 4)
    cap = 4
    for branch in (0, 3):
        (trial,) = continuations(
            env, retry, repaired_bank([], HOLLOW, None), arm="with", branch_step=branch,
            agent=Dawdler(), seeds=[0], config=RolloutConfig(max_turns=cap, concurrency=1),
        )  # fmt: skip
        assert trial.replay_faithful
        # the replayed turns do not count: the agent acts `cap` times after the branch, no more
        assert len(trial.trajectory.steps) - branch == cap
        assert (
            trial.valid_actions
            + sum(s.protocol_error is not None for s in trial.trajectory.steps[branch:])
            == cap
        )
