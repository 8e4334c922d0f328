"""The cold start: success cards without gold, failure cards at cold start, consolidation by
proposed text, drafts up to 16, an incomplete Gate A, and (slow) the whole Trace2Skill path to
S_0 through the evaluator's Gate A over HTTP."""

import json
import uuid
from dataclasses import replace

import numpy as np
import pytest
from registry_server import GRANTS, TOKENS

from services.analyst.cold_start import (
    BATCH_CARDS,
    MAX_CLUSTERS_PER_BATCH,
    bare_run_cards,
    cold_start_job,
    consolidate,
    drafts_of,
    success_card,
)
from services.analyst.mechanisms import LIBRARY
from services.analyst.rules_backend import AnalysisInput, analyze
from services.analyst.settings import AnalystSettings
from services.analyst.trace import gold_facts, read_trace
from shared.contracts.analyst_api.schemas import ColdStartCreate
from shared.contracts.chunks import ChunkContent
from shared.contracts.evaluator_api.schemas import JobPublic
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
    GateStatus,
)
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from tests.analyst.support import failed_traces, small_env
from tests.live_servers import live_server


def successes(env, n=24):
    """Bare runs of a TEST DOUBLE that shops well on its own (every mechanism, unprompted)."""
    policy = make_backend("procedural", "skilled", slip=0.0, competence=1.0)
    specs = [EpisodeSpec(task_id=t, seed=i) for i, t in enumerate(env.task_ids("train")[:n])]
    runs = run_episodes(env, policy, specs, RolloutConfig(concurrency=8))
    return [t for t in runs if t.scored and t.components["r_success"] == 1.0]


def cold_request(env, trace, verifier=None):
    return AnalysisInput(env=env, trajectory=trace, bank=[], round=0, cold_start=True,
                         seed=3, verifier=verifier)  # fmt: skip


def test_success_cards_carry_no_gold_in_their_text():
    env = small_env()
    trace = successes(env)[0]
    task = env.task(trace.task_id)
    gold = gold_facts(task, read_trace(trace))
    card = success_card(cold_request(env, trace), "explicit_query", 0, gold=gold)
    assert card.extras["kind"] == "success" and card.firewall_findings == []
    text = card.deployable.model_dump_json()
    assert task.gold_asin not in text and task.gold_title not in text
    # the gold the firewall checked stays in the privileged audit, never in the card's text
    assert card.privileged_audit["firewall_gold"]["goal_title"] == task.gold_title


def test_a_success_card_goes_through_the_paired_check():
    # The blind agent already does everything the success cards name: with the card or
    # without it, it succeeds alike, so no success card may become eligible on its own say.
    env = small_env()
    traces = successes(env)
    skilled = make_backend("procedural", "skilled-verifier", slip=0.0, competence=1.0)
    cards, count = bare_run_cards(env, traces, analyze, checkpoint_id="base",
                                  settings=AnalystSettings(), verifier=skilled)  # fmt: skip
    assert count == len(traces) > 0 and cards
    for card in cards:
        checked = card.extras["verification"]
        assert checked["k"] == 4 and len(checked["seeds"]) == 4
        assert checked["with"] == checked["without"] and not checked["verified"]
        assert not card.eligible and card.outcome == CardOutcome.NO_PROPOSAL


def test_a_success_card_is_verified_when_its_repair_beats_its_absence():
    # the slip-0 tester shops naively on its own: a success card's chunk is what moves it
    env = small_env()
    cards, _ = bare_run_cards(env, successes(env), analyze, checkpoint_id="base",
                              settings=AnalystSettings())  # fmt: skip
    verified = [card for card in cards if card.extras["verification"]["verified"]]
    assert verified and all(card.eligible for card in verified)
    for card in verified:
        checked = card.extras["verification"]
        assert checked["with"] > checked["without"] and checked["with"] >= 1


def test_a_success_card_passes_the_firewall(monkeypatch):
    env = small_env()
    trace = successes(env)[0]
    task = env.task(trace.task_id)
    template = LIBRARY["explicit_query"]
    leaking = template.template.model_copy(update={"avoid": f"Anything but {task.gold_title}."})
    monkeypatch.setitem(LIBRARY, "explicit_query", replace(template, template=leaking))
    gold = gold_facts(task, read_trace(trace))
    card = success_card(cold_request(env, trace), "explicit_query", 0, gold=gold)
    assert card.firewall_findings and not card.eligible


def by_title(texts):
    """A TEST DOUBLE of the sentence embedding: texts with the same title (first line) get
    the same unit vector, different titles orthogonal ones."""
    titles = list(dict.fromkeys(text.split("\n", 1)[0] for text in texts))
    vectors = np.zeros((len(texts), len(titles)))
    for row, text in enumerate(texts):
        vectors[row, titles.index(text.split("\n", 1)[0])] = 1.0
    return vectors


def llm_card(title: str, *, eligible=True) -> CardCreate:
    """An eligible card as the llm backend writes it: its own text, no `mechanism` key."""
    text = ChunkContent(title=title, applies_when="a", procedure=["b"], verify="c", avoid="d")
    deployable = DeployableAbstraction(
        failure_mechanism="free text", applicable_when="a", observable_trigger="t",
        corrective_procedure="b", verification_step="c", proposed_content=text,
    )  # fmt: skip
    return CardCreate(
        round=0, task_id="task-000001", outcome=CardOutcome.ADD, eligible=eligible,
        deployable=deployable, extras={"backend": "llm"},
    )  # fmt: skip


def verified_success_card(mechanism: str) -> CardCreate:
    """An eligible success card as the cold start writes it once its check passed."""
    card = llm_card(mechanism)
    return card.model_copy(update={
        "deployable": card.deployable.model_copy(
            update={"proposed_content": LIBRARY[mechanism].template}),
        "extras": {"kind": "success", "mechanism": mechanism, "backend": "rules"},
    })  # fmt: skip


def test_cards_cluster_by_proposed_text_whatever_their_backend():
    cards = [verified_success_card("price_check"), llm_card("Compare two sellers"),
             verified_success_card("explicit_query"), llm_card("Compare two sellers"),
             llm_card("Read the reviews"), llm_card("Ignored", eligible=False),
             verified_success_card("price_check")]  # fmt: skip
    clusters = consolidate(cards, by_title)
    assert clusters == [[0, 6], [1, 3], [2], [4]]  # the ineligible card takes no part
    drafts = drafts_of(cards, clusters, 16)
    # workflow order first (query, then price), then the rest by support
    assert [d.title for d in drafts] == [
        LIBRARY["explicit_query"].template.title,
        LIBRARY["price_check"].template.title,
        "Compare two sellers",
        "Read the reviews",
    ]


def test_up_to_16_drafts_one_per_cluster():
    # batch one (40 cards): ideas 0-11, idea 0 the best supported; batch two: ideas 12-19
    first = [llm_card(f"Idea {i:02d}") for i in range(12) for _ in range(3)]
    first += [llm_card("Idea 00")] * 4
    cards = first + [llm_card(f"Idea {i:02d}") for i in range(12, 20) for _ in range(3)]
    clusters = consolidate(cards, by_title)
    assert len(clusters) == 20
    drafts = drafts_of(cards, clusters, 16)
    assert len(drafts) == 16 and drafts[0].title == "Idea 00"  # best supported first
    assert len(drafts_of(cards, clusters, 5)) == 5


def test_consolidation_batches_of_40_with_at_most_12_clusters():
    cards = [llm_card(f"k{i % 13:02d}") for i in range(13)] + [llm_card("k00")] * 50
    clusters = consolidate(cards, by_title)
    first_batch = {tuple(c) for c in clusters if min(c) < BATCH_CARDS}
    assert len(first_batch) <= MAX_CLUSTERS_PER_BATCH  # 13 texts in batch one: 12 clusters
    members = sorted(i for group in clusters for i in group)
    assert members == list(range(len(cards)))  # every eligible card in exactly one cluster


def test_failure_cards_at_cold_start_are_written_on_an_empty_bank_with_no_rewrite():
    env = small_env()
    traces = failed_traces(env, n=3)
    seen = []

    def analyzer(request):
        seen.append((request.cold_start, list(request.bank), request.round))
        return CardCreate(round=0, task_id=request.trajectory.task_id,
                          outcome=CardOutcome.NO_PROPOSAL, eligible=False)  # fmt: skip

    cards, successes = bare_run_cards(env, traces, analyzer, checkpoint_id="base",
                                      settings=AnalystSettings())  # fmt: skip
    assert successes == 0 and len(cards) == len(traces)
    assert seen == [(True, [], 0)] * len(traces)


def test_a_gate_a_that_did_not_finish_is_incomplete_not_kept_none(registry_url, tmp_path):
    tag = uuid.uuid4().hex[:6]
    settings = AnalystSettings(registry_url=registry_url, registry_token=TOKENS["analyst"],
                               data_dir=tmp_path)  # fmt: skip
    body = ColdStartCreate(
        run_id=f"cs-{tag}", policy={"checkpoint_id": f"base-{tag}", "backend": "procedural"},
        env_preset="test", n_tasks=12,
    )  # fmt: skip

    sent_keys = []

    def gate_a_gone(request, idempotency_key=None):
        sent_keys.append(idempotency_key)
        raise TimeoutError("Gate A job still running")

    with RegistryClient(registry_url, TOKENS["trainer"]) as trainer:
        trainer.create_checkpoint(f"base-{tag}", uri="file:///procedural-test-double", step=0,
                                  round=0)  # fmt: skip

    with settings.registry_client() as client:
        result = cold_start_job(body, settings=settings, client=client, analyzer=analyze,
                                folder=tmp_path, gate_a=gate_a_gone, embed=by_title)  # fmt: skip
    assert result["draft_version_ids"], "the tiny run must give drafts for the gate to test"
    assert result["gate_a_status"] == "incomplete" and "TimeoutError" in result["gate_a_error"]
    assert result["s0_bank_id"] is None and result["s0_size"] is None
    # every checked card's paired counts, k and seeds: in the job's result and on the card
    checked = result["verification"]
    assert checked and result["n_verified"] == sum(row["verified"] for row in checked)
    with settings.registry_client() as client:
        for row in checked:
            stored = client.get_card(row["card_id"]).extras["verification"]
            assert {key: stored[key] for key in ("with", "without", "k", "seeds")} == {
                key: row[key] for key in ("with", "without", "k", "seeds")
            }
            assert row["k"] == 4 and len(row["seeds"]) == 4
            assert row["verified"] == (row["with"] >= 1 and row["with"] > row["without"])
    # the key the evaluator replays the first Gate A job by, when a retried cold start asks
    # again (issue 34, item 4)
    assert sent_keys == [f"cold-start:cs-{tag}:gate-a"]


def test_a_gate_a_the_registry_holds_incomplete_is_incomplete_though_its_job_ended(
    registry_url, tmp_path
):
    """A Gate A job that reports success is not a decision: the registry's record of the gate
    run is (here a run the registry holds as `incomplete`, closed short of its tasks)."""
    tag = uuid.uuid4().hex[:6]
    settings = AnalystSettings(registry_url=registry_url, registry_token=TOKENS["analyst"],
                               data_dir=tmp_path)  # fmt: skip
    body = ColdStartCreate(
        run_id=f"cs-{tag}", policy={"checkpoint_id": f"base-{tag}", "backend": "procedural"},
        env_preset="test", n_tasks=12,
    )  # fmt: skip
    with RegistryClient(registry_url, TOKENS["trainer"]) as trainer:
        trainer.create_checkpoint(f"base-{tag}", uri="file:///procedural-test-double", step=0,
                                  round=0)  # fmt: skip

    def gate_a_cut_short(request, idempotency_key=None):  # a TEST DOUBLE of Gate A's job
        columns = [{"chunk_version_id": vid, "kind": "draft", "slot": slot}
                   for slot, vid in enumerate(request.draft_version_ids)]  # fmt: skip
        identity = {"model": "procedural", "decoding": "cpu", "prompt_version": "v",
                    "prompt_fingerprint": "f", "env_version": "e",
                    "action_protocol": "a"}  # fmt: skip
        with RegistryClient(registry_url, TOKENS["evaluator"]) as evaluator:
            run = evaluator.create_gate_run({
                "kind": "gate_a", "round": 0, "checkpoint_id": request.checkpoint_id,
                "candidate_pool": {"columns": columns}, "mask_seed": 20260901, "budget": 2,
                "n_tasks": 6, "identity": identity,
                "bare_baseline": {"source": "fresh", "plan_sha256": "ab" * 32},
            })  # fmt: skip
            evaluator.close_gate_run(run.id, GateStatus.incomplete, note="cut short")
        return JobPublic(
            id="job-1", kind="gate-a", status="succeeded", request={}, created_at="2026-01-01",
            started_at=None, finished_at=None, progress={}, error=None,
            result={"registry": {"gate_run_id": run.id, "bank_id": None}},
        )  # fmt: skip

    with settings.registry_client() as client:
        result = cold_start_job(body, settings=settings, client=client, analyzer=analyze,
                                folder=tmp_path, gate_a=gate_a_cut_short,
                                embed=by_title)  # fmt: skip
    assert result["gate_a_status"] == "incomplete"
    assert "is incomplete" in result["gate_a_error"] and result["s0_size"] is None


@pytest.mark.slow
def test_cold_start_yields_drafts_and_s0_through_gate_a(registry_url, tmp_path):
    tag = uuid.uuid4().hex[:6]
    checkpoint, alias = f"base-{tag}", f"cs-{tag}"
    trainer = RegistryClient(registry_url, TOKENS["trainer"])
    trainer.create_checkpoint(checkpoint, uri="file:///procedural-test-double", step=0, round=0)
    options = {"slip": 0.05, "competence": 0.5}
    evaluator_env = {
        "EVALUATOR_REGISTRY_URL": registry_url,
        "EVALUATOR_REGISTRY_TOKEN": TOKENS["evaluator"],
        "EVALUATOR_JOBS_DIR": str(tmp_path / "evaluator"),
        "EVALUATOR_BACKEND": "procedural",
        "EVALUATOR_BACKEND_OPTIONS": json.dumps(options),
        "EVALUATOR_ENV_PRESET": "cpu",
        "EVALUATOR_TOKENS": json.dumps(GRANTS),
    }
    with live_server(["gate", "serve"], evaluator_env, tmp_path / "evaluator.log") as evaluator_url:
        settings = AnalystSettings(
            registry_url=registry_url, registry_token=TOKENS["analyst"],
            evaluator_url=evaluator_url, evaluator_token=TOKENS["analyst"],
            data_dir=tmp_path / "analyst", backend_options=options,
        )  # fmt: skip
        body = ColdStartCreate(
            run_id=f"cs-{tag}", policy={"checkpoint_id": checkpoint, "backend": "procedural"},
            env_preset="cpu", n_tasks=120, alias=alias,
        )  # fmt: skip
        with settings.registry_client() as client:
            result = cold_start_job(
                body, settings=settings, client=client, analyzer=analyze, folder=tmp_path
            )
            again = cold_start_job(
                body.model_copy(update={"gate_a": False}), settings=settings, client=client,
                analyzer=analyze, folder=tmp_path,
            )  # fmt: skip
            s0 = client.get_bank(client.get_alias(alias).bank_id)
    assert result["n_successes"] > 0 and result["n_cards"] > result["n_successes"] // 2
    assert 1 <= len(result["draft_version_ids"]) <= 16
    assert again["draft_version_ids"] == result["draft_version_ids"]  # resumed, not duplicated
    assert result["gate_a_job_id"] and result["s0_bank_id"] == s0.id
    assert result["gate_a_status"] == "complete" and result["s0_size"] == len(s0.entries)
    assert s0.frozen_at is not None and 1 <= len(s0.entries) <= 10
    (tmp_path / "cold-start.json").write_text(json.dumps(result, indent=1))
    trainer.close()
