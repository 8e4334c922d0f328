"""The cold start: success cards without gold, consolidation limits, and (slow) the whole
Trace2Skill path to S_0 through the evaluator's Gate A over HTTP."""

import json
import uuid

import pytest
from registry_server import TOKENS

from services.analyst.cold_start import (
    BATCH_CARDS,
    MAX_CLUSTERS_PER_BATCH,
    cold_start_job,
    consolidate,
    success_card,
)
from services.analyst.mechanisms import WORKFLOW
from services.analyst.rules_backend import analyze
from services.analyst.settings import AnalystSettings
from shared.analyst_api.schemas import ColdStartCreate
from shared.registry_api.client import RegistryClient
from tests.analyst.support import failed_traces, small_env
from tests.live_servers import live_server


def test_success_cards_carry_no_gold():
    env = small_env()
    trace = failed_traces(env, n=1)[0]  # any trajectory: the card reads no gold
    task = env.task(trace.task_id)
    card = success_card(task, "explicit_query", trace)
    assert card.extras["kind"] == "success" and card.eligible
    assert card.privileged_audit == {}
    text = card.deployable.model_dump_json()
    assert task.gold_asin not in text and task.gold_title not in text


def test_consolidation_batches_of_40_with_at_most_12_clusters():
    env = small_env()
    trace = failed_traces(env, n=1)[0]
    task = env.task(trace.task_id)
    cards = [success_card(task, WORKFLOW[i % len(WORKFLOW)], trace) for i in range(100)]
    # 13 distinct keys in the first batch: the 13th cannot open a cluster there.
    for index in range(13):
        cards[index] = cards[index].model_copy(update={"extras": {"mechanism": f"k{index:02d}"}})
    clusters = consolidate(cards)
    first_batch = {k for k, members in clusters.items() if min(members) < BATCH_CARDS}
    assert len(first_batch) <= MAX_CLUSTERS_PER_BATCH
    assert "k12" not in clusters
    members = sorted(i for group in clusters.values() for i in group)
    assert members == sorted(set(members))  # every card in one cluster at most


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
    }
    with live_server(["gate", "serve"], evaluator_env, tmp_path / "evaluator.log") as evaluator_url:
        settings = AnalystSettings(
            registry_url=registry_url, registry_token=TOKENS["analyst"],
            evaluator_url=evaluator_url, data_dir=tmp_path / "analyst", backend_options=options,
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
    assert s0.frozen_at is not None and 1 <= len(s0.entries) <= 10
    (tmp_path / "cold-start.json").write_text(json.dumps(result, indent=1))
    trainer.close()
