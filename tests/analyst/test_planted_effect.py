"""The planted-effect run: the whole slow loop over live services with the `procedural` policy,
a TEST DOUBLE whose failures have known causes (it follows only the skill chunks it
recognises), on the `cpu` preset.

S_0 is empty. Each round a stand-in for the trainer (the procedural policy, frozen: no GRPO
update) runs groups of siblings on train tasks under the current bank and submits the
all-wrong ones to the analyst; the analyst retries, diagnoses with the rules backend and
compiles candidates; the evaluator's interval gate adopts the positive ones. The adopted bank
must beat the empty bank on val by a clear margin.

Figures (funnel per round, val success) are written to `$ANALYST_PLANTED_OUT` when set
(docs/analyst.md quotes a run).
"""

import json
import os
import uuid

import httpx
import pytest
from registry_server import GRANTS, TOKENS

from shared.contracts.analyst_api import AnalystClient
from shared.contracts.analyst_api.schemas import (
    AllWrongGroupSubmit,
    CompileRoundCreate,
    CompileRoundResult,
)
from shared.contracts.chunks import InjectedChunk
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import EvidenceCreate, TreatmentMode
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.runtime.shopsim.env import ShopEnv
from tests.analyst.services import wait_job
from tests.live_servers import live_server

GROUP_SIZE, TRAIN_TASKS, ROUNDS, SLIP = 4, 80, 3, 0.05
MARGIN = 0.25  # the adopted bank's val success must exceed the empty bank's by this much


def bank_chunks(bank) -> list[InjectedChunk]:
    return [
        InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in bank.entries
    ]


def val_success(env, chunks, seed=100) -> float:
    policy = make_backend("procedural", "val-test-double", slip=SLIP)
    specs = [
        EpisodeSpec(task_id=task, seed=seed + i, chunks=tuple(chunks))
        for i, task in enumerate(env.task_ids("val"))
    ]
    trajectories = run_episodes(env, policy, specs, RolloutConfig(concurrency=32))
    return sum(t.components["r_success"] for t in trajectories) / len(trajectories)


def submit_all_wrong_groups(env, analyst, trainer, *, run_id, round, bank, checkpoint) -> int:
    """The trainer's part, played by the frozen procedural policy: full-bank groups."""
    policy = make_backend("procedural", "trainer-test-double", slip=SLIP)
    chunks = bank_chunks(bank)
    tasks = env.task_ids("train")[round * TRAIN_TASKS : (round + 1) * TRAIN_TASKS]
    specs = [
        EpisodeSpec(
            task_id=task,
            seed=1000 * round + 10 * i + s,
            chunks=tuple(chunks),
            episode_id=f"r{round}-g{i}-s{s}",
        )
        for i, task in enumerate(tasks)
        for s in range(GROUP_SIZE)
    ]
    trajectories = run_episodes(env, policy, specs, RolloutConfig(concurrency=32))
    submitted = 0
    mode = TreatmentMode.assisted if chunks else TreatmentMode.assisted_empty
    for index, task in enumerate(tasks):
        siblings = trajectories[index * GROUP_SIZE : (index + 1) * GROUP_SIZE]
        if not all(t.scored and t.components["r_success"] == 0 for t in siblings):
            continue
        treatment = {"mode": mode, "inclusion": [1] * len(chunks)}
        evidence = trainer.record_all_wrong_group(
            EvidenceCreate(task_id=task, round=round, step=index, group_index=0,
                           treatment=treatment, bank_id=bank.id, checkpoint_id=checkpoint)
        )  # fmt: skip
        analyst.submit_all_wrong_group(
            AllWrongGroupSubmit(
                run_id=run_id, round=round, step=index, group_index=0, task_id=task,
                bank_id=bank.id, bank_hash=bank.content_hash, treatment=treatment,
                siblings=[{"reward": t.reward} for t in siblings], evidence_id=evidence.id,
                checkpoint_id=checkpoint,
            )
        )  # fmt: skip
        submitted += 1
    return submitted


@pytest.mark.slow
def test_planted_effect_rules_backend_finds_the_missing_procedures(registry_url, tmp_path):
    tag = uuid.uuid4().hex[:6]
    run_id, alias, checkpoint = f"planted-{tag}", f"cur-{tag}", f"proc-{tag}"
    operator = RegistryClient(registry_url, TOKENS["operator"])
    trainer = RegistryClient(registry_url, TOKENS["trainer"])
    trainer.create_checkpoint(checkpoint, uri="file:///procedural-test-double", step=0, round=0)
    empty = operator.create_bank([], round=0, note="S_0 empty (planted-effect run)")
    operator.freeze_bank(empty.id)
    operator.create_alias(alias, empty.id, reason="planted-effect run starts empty")
    env = ShopEnv.from_preset("cpu")
    evaluator_env = {
        "EVALUATOR_REGISTRY_URL": registry_url,
        "EVALUATOR_REGISTRY_TOKEN": TOKENS["evaluator"],
        "EVALUATOR_JOBS_DIR": str(tmp_path / "evaluator"),
        "EVALUATOR_BACKEND": "procedural",
        "EVALUATOR_BACKEND_OPTIONS": json.dumps({"slip": SLIP}),
        "EVALUATOR_ENV_PRESET": "cpu",
        "EVALUATOR_TOKENS": json.dumps(GRANTS),
    }
    analyst_env = {
        "ANALYST_REGISTRY_URL": registry_url,
        "ANALYST_REGISTRY_TOKEN": TOKENS["analyst"],
        "ANALYST_DATA_DIR": str(tmp_path / "analyst"),
        "ANALYST_BACKEND_OPTIONS": json.dumps({"slip": SLIP}),
        "ANALYST_TOKENS": json.dumps(GRANTS),
    }
    figures = {"rounds": []}
    trainer_auth = {"Authorization": f"Bearer {TOKENS['trainer']}"}
    with (
        live_server(["gate", "serve"], evaluator_env, tmp_path / "evaluator.log") as evaluator_url,
        live_server(["analyst", "serve"], analyst_env, tmp_path / "analyst.log") as analyst_url,
        AnalystClient(analyst_url, token=TOKENS["trainer"]) as analyst,  # as the trainer calls
        httpx.Client(base_url=evaluator_url, headers=trainer_auth, timeout=600) as evaluator,
    ):
        analyst.wait_ready(timeout=60)
        for round in range(ROUNDS):
            bank = operator.get_bank(operator.get_alias(alias).bank_id)
            groups = submit_all_wrong_groups(
                env, analyst, trainer, run_id=run_id, round=round, bank=bank,
                checkpoint=checkpoint,
            )  # fmt: skip
            job = analyst.compile_round(
                CompileRoundCreate(
                    run_id=run_id,
                    round=round,
                    bank_id=bank.id,
                    env_preset="cpu",
                    seed=round,
                    policy={"checkpoint_id": checkpoint, "backend": "procedural"},
                )
            )
            result = CompileRoundResult.model_validate(analyst.wait(job.id, timeout=1800).result)
            funnel = result.funnel
            assert funnel.all_wrong_groups == groups and funnel.retries == groups
            assert funnel.cards + funnel.deficits + funnel.runtime_errors == groups
            assert funnel.eligible <= funnel.verified <= funnel.cards  # eligible needs verified
            assert len(result.candidates) <= 6
            record = {"round": round, "bank_size": len(bank.entries),
                      "funnel": funnel.model_dump(), "candidates": [c.title for c in
                      result.candidates]}  # fmt: skip
            figures["rounds"].append(record)
            if not result.candidate_ids:
                break
            response = evaluator.post(
                "/v1/gate-jobs",
                json={"checkpoint_id": checkpoint, "round": round, "alias": alias,
                      "base_bank_id": bank.id, "candidate_ids": result.candidate_ids},
            )  # fmt: skip
            assert response.status_code == 202, response.text
            gate = wait_job(evaluator, response.headers["location"])
            assert gate["status"] == "succeeded", gate.get("error")
            record["gate"] = {
                "status": gate["result"]["status"],
                "bank_id": gate["result"]["registry"]["bank_id"],
                "alias_moved": gate["result"]["registry"]["alias_moved"],
            }
        # The rules backend's first-round candidates are the query-stage procedures the
        # naive policy lacks, and at least one of them passed the gate.
        assert figures["rounds"][0]["funnel"]["candidates"] >= 1
        adopted = operator.get_bank(operator.get_alias(alias).bank_id)
        assert adopted.id != empty.id and adopted.entries
        before, after = val_success(env, []), val_success(env, bank_chunks(adopted))
        figures.update(
            empty_val_success=before,
            adopted_val_success=after,
            adopted=[e.content.title for e in adopted.entries],
        )
        if out := os.environ.get("ANALYST_PLANTED_OUT"):
            with open(out, "w") as handle:
                json.dump(figures, handle, indent=1)
        assert after - before >= MARGIN, figures
    operator.close()
    trainer.close()
