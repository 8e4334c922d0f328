"""Counterfactual trials (`services/analyst/counterfactual_trials.py`): the failed retry replayed
up to the branch, then a blind agent with the card's chunk; only a faithful replay, the card's
own prompt and R_success = 1 make a success."""

import pytest

from services.analyst.counterfactual_trials import counterfactual_trial, repaired_bank
from services.analyst.mechanisms import LIBRARY
from shared.runtime.agent.backends import make_backend
from tests.analyst.support import failed_traces, library_bank, small_env


@pytest.fixture(scope="module")
def env():
    return small_env()


@pytest.fixture(scope="module")
def retry(env):
    """A failed naive episode with a few steps to replay."""
    return next(t for t in failed_traces(env, n=10) if len(t.steps) >= 4)


def blind_agent():
    return make_backend("procedural", "blind", slip=0.0)


def test_the_replayed_turns_are_the_retrys_and_the_agent_acts_after_the_branch(env, retry):
    chunks = repaired_bank([], LIBRARY["price_check"].template, None)
    trial = counterfactual_trial(env, retry, chunks, branch_step=3, agent=blind_agent(), seed=4)
    replayed = trial.trajectory.steps[:3]
    assert [s.action for s in replayed] == [s.action for s in retry.steps[:3]]
    assert [s.observation for s in replayed] == [s.observation for s in retry.steps[:3]]
    assert trial.replay_faithful and trial.branch_step == 3 and trial.prompt_faithful
    assert trial.agent == "procedural-test-double:blind" and trial.seed == 4
    assert trial.valid_actions == sum(s.action is not None for s in trial.trajectory.steps[3:])


def test_a_replay_that_meets_other_pages_is_no_success(env, retry):
    # a retry whose recorded page differs from what its actions give: the replay is not the
    # retry's history, so even a purchase that succeeds would not count
    steps = list(retry.steps)
    steps[0] = steps[0].model_copy(update={"observation": "Page: something else"})
    tampered = retry.model_copy(update={"steps": steps})
    chunks = repaired_bank([], LIBRARY["explicit_query"].template, None)
    trial = counterfactual_trial(env, tampered, chunks, branch_step=1, agent=blind_agent(), seed=0)
    assert not trial.replay_faithful and not trial.success


def test_add_appends_the_card_chunk_and_rewrite_takes_the_targets_slot():
    bank = library_bank("explicit_query", "option_choice")  # chunk ids 1, 2
    new = LIBRARY["price_check"].template
    added = repaired_bank(bank, new, None)
    assert [(c.chunk_id, c.version) for c in added] == [
        ("chunk-1", 1),
        ("chunk-2", 1),
        ("card-proposal", 1),
    ]
    assert added[-1].content == new
    rewritten = repaired_bank(bank, new, 1)
    assert [(c.chunk_id, c.version) for c in rewritten] == [("chunk-1", 2), ("chunk-2", 1)]
    assert rewritten[0].content == new and rewritten[1].content == bank[1].content


def test_the_blind_agent_setting_picks_the_frozen_policy_by_default():
    from services.analyst.settings import AnalystSettings

    policy = blind_agent()
    assert AnalystSettings().verifier == "policy"
    assert AnalystSettings().blind_agent(policy) is policy
    assert AnalystSettings(verifier="procedural").blind_agent(policy) is None  # the test double
    with pytest.raises(LookupError):
        AnalystSettings(verifier="analyst_model").blind_agent(policy)
    served = AnalystSettings(verifier="analyst_model", llm_base_url="http://127.0.0.1:9/v1",
                             llm_model="analyst-model").blind_agent(policy)  # fmt: skip
    assert served is not policy and served.name == "openai" and "analyst-model" in served.model_id
    served.close()
