"""Gate A (cold start) end to end against the live registry: cold-start drafts -> Gate A run ->
raw observations -> decision -> S_0 (rho from the Gate A coefficients, q = 0.2) -> `current`.

The HTTP job runs on the simulated policy (a test double of the backend, known effects); the
`intraskill gate cold-start` CLI runs on the tiny transformers model (slow).
"""

import json
import os
import uuid

import pytest
from gate_service_support import client, content, make_app, service_client, wait
from registry_server import TOKENS

from services.evaluator import cli
from services.evaluator.stored_gate import load_gate_run
from shared.contracts.inclusion import rho_from_coefficients
from shared.contracts.registry_api.client import NotFound
from shared.contracts.registry_api.schemas import ChunkSource, GateKind, GateStatus

# 16 drafts, K_init = 10. At 1,200 tasks the HC3 SE is ~0.033, so the strong effects (+0.2,
# -0.15) are decided for certain and at least 11 of the 14 positive drafts come out positive,
# so the budget binds (300 simulated draws of the slugs: always >= 12 positive).
TASKS = [f"task-{i:06d}" for i in range(1200)]
STRONG, HARMFUL = (3, 9), (0, 12)


@pytest.fixture
def drafts(registry_url):
    """Sixteen cold-start draft chunks in no bank, and the base model's checkpoint."""
    tag = uuid.uuid4().hex[:6]
    analyst, trainer = client(registry_url, "analyst"), client(registry_url, "trainer")
    checkpoint = f"base-{tag}"
    trainer.create_checkpoint(checkpoint, uri=f"file:///weights/{checkpoint}", step=0, round=0)
    versions = [
        analyst.create_chunk(
            f"d{i:02d}-{tag}", content(f"d{i:02d}-{tag}"), source=ChunkSource.cold_start
        ).latest
        for i in range(16)
    ]
    yield {
        "tag": tag,
        "checkpoint": checkpoint,
        "versions": versions,
        "ids": [f"{v.slug}@{v.version}" for v in versions],
        "alias": f"cur-{tag}",
    }
    analyst.close()
    trainer.close()


def true_effects(ids: list[str]) -> dict[str, float]:
    effects = dict.fromkeys(ids, 0.07)
    effects.update({ids[i]: 0.2 for i in STRONG})
    effects.update({ids[i]: -0.15 for i in HARMFUL})
    return effects


def gate_a_app(registry_url, tmp_path, drafts, **kwargs):
    app, state, _ = make_app(registry_url, tmp_path, tasks=TASKS, base_rate=(0.1, 0.2), **kwargs)
    state["effects"] = true_effects(drafts["ids"])
    return app, state


def body(drafts, **fields) -> dict:
    return {
        "checkpoint_id": drafts["checkpoint"],
        "draft_version_ids": [v.id for v in drafts["versions"]],
        "alias": drafts["alias"],
        **fields,
    }


def test_gate_a_selects_s0_and_creates_current(registry_url, drafts, tmp_path):
    ids = drafts["ids"]
    app, _ = gate_a_app(registry_url, tmp_path, drafts)
    with service_client(app) as http:
        answer = http.post("/v1/gate-a-jobs", json=body(drafts))
        assert answer.status_code == 202, answer.text
        assert answer.headers["location"] == f"/v1/gate-a-jobs/{answer.json()['id']}"
        job = wait(http, answer.headers["location"])
        assert job["status"] == "succeeded", job["error"]
        assert http.get(f"/v1/gate-jobs/{job['id']}").status_code == 404  # another job kind
        assert [j["id"] for j in http.get("/v1/gate-a-jobs").json()] == [job["id"]]
        # the stored gate re-fits to the same decision (its kind, K and solver come from the run)
        refit = http.post(
            "/v1/refits", json={"gate_run_id": job["result"]["registry"]["gate_run_id"]}
        )
    result = job["result"]
    decision, recorded = result["decision"], result["registry"]
    assert result["status"] == "complete" and result["paired"] == len(TASKS)
    assert refit.json()["selected"] == decision["selected"]

    # positive top K_init = 10 by (-beta, chunk id), kept in draft order
    beta = decision["coefficients"]
    ranked = sorted(ids, key=lambda vid: (-beta[vid], vid))
    expected = [vid for vid in ranked if beta[vid] > 0][:10]
    assert decision["selected"] == [vid for vid in ids if vid in expected]
    assert len(decision["selected"]) == 10
    assert {ids[i] for i in STRONG} <= set(decision["selected"])
    assert {decision["status"][ids[i]] for i in HARMFUL} == {"non_positive"}
    assert "budget_excluded" in decision["status"].values()
    assert set(decision["status"].values()) <= {"selected", "non_positive", "budget_excluded"}
    rho = rho_from_coefficients({vid: beta[vid] for vid in decision["selected"]})
    assert decision["next_rho"] == pytest.approx(rho)
    assert max(rho.values()) == pytest.approx(0.9) and min(rho.values()) >= 0.2

    registry = client(registry_url, "reader")
    run = registry.get_gate_run(recorded["gate_run_id"])
    assert run.kind == GateKind.gate_a and run.base_bank_id is None
    assert run.status == GateStatus.complete and run.n_observations == run.n_tasks == len(TASKS)
    assert (run.budget, run.split, run.mask_seed) == (10, "val", 20260901)
    assert [c.kind for c in run.candidate_pool.columns] == ["draft"] * 16
    assert [c.chunk_version_id for c in run.candidate_pool.columns] == [
        v.id for v in drafts["versions"]
    ]
    assert run.identity.model == "simulated-policy" and run.bare_baseline.source == "fresh"
    stored = registry.get_gate_decision(run.id)
    assert stored.provisional is False and stored.id == recorded["decision_id"]
    assert {f"{r.slug}@{r.version}": r.status for r in stored.rows} == decision["status"]
    observations = registry.list_observations(run.id)
    assert len(observations) == len(TASKS)
    # Gate A masks are Bernoulli(1/2) per draft: every draft is in about half the prompts
    shares = [sum(o.inclusion[j] for o in observations) / len(TASKS) for j in range(16)]
    assert all(0.44 < share < 0.56 for share in shares)

    s0 = registry.get_bank_by_alias(drafts["alias"])
    assert s0.id == recorded["bank_id"] and recorded["alias_moved"] is True
    assert s0.content_hash is not None and s0.gate_decision_id == stored.id
    assert (s0.round, s0.q, s0.parent_bank_id) == (0, 0.2, None)
    assert [f"{e.slug}@{e.version}" for e in s0.entries] == decision["selected"]
    assert [e.rho for e in s0.entries] == pytest.approx([rho[v] for v in decision["selected"]])
    assert [e.coefficient for e in s0.entries] == pytest.approx(
        [beta[v] for v in decision["selected"]]
    )
    history = registry.alias_history(drafts["alias"])
    assert [(h.action, h.to_bank_id, h.gate_decision_id) for h in history] == [
        ("create", s0.id, stored.id)
    ]
    design, stored_observations, solver = load_gate_run(run.id, registry)
    assert design.kind == "gate_a" and design.column_ids == tuple(ids) and solver == "statsmodels"
    assert len(stored_observations) == len(TASKS)
    registry.close()


def test_incomplete_gate_a_stores_a_provisional_fit_and_keeps_current(
    registry_url, drafts, tmp_path
):
    operator = client(registry_url, "operator")
    before = operator.create_bank([], round=0, note="hand-made bank before cold start")
    operator.freeze_bank(before.id)
    operator.create_alias(drafts["alias"], before.id, reason="placeholder")
    broken = set(TASKS[:3])
    app, _ = gate_a_app(
        registry_url, tmp_path, drafts, fail=lambda r: r.task_id in broken and r.arm == "masked"
    )
    with service_client(app) as http:
        answer = http.post("/v1/gate-a-jobs", json=body(drafts, n_tasks=200, max_retries=0))
        job = wait(http, answer.headers["location"])
    assert job["status"] == "succeeded", job["error"]
    result, recorded = job["result"], job["result"]["registry"]
    assert result["status"] == "incomplete" and len(result["unpaired"]) == 3
    assert recorded["provisional"] is True and recorded["bank_id"] is None
    run = operator.get_gate_run(recorded["gate_run_id"])
    assert run.status == GateStatus.incomplete and run.n_observations == 197
    stored = operator.get_gate_decision(run.id)
    assert stored.provisional is True and all(task in stored.note for task in broken)
    assert operator.get_alias(drafts["alias"]).bank_id == before.id  # current did not move
    assert all(b.gate_decision_id != stored.id for b in operator.list_banks(limit=500).items)

    # a complete Gate A afterwards moves the existing alias with If-Match
    app, _ = gate_a_app(registry_url, tmp_path / "again", drafts)
    with service_client(app) as http:
        job = wait(http, http.post("/v1/gate-a-jobs", json=body(drafts, n_tasks=200)).headers[
            "location"
        ])  # fmt: skip
    recorded = job["result"]["registry"]
    assert job["result"]["status"] == "complete" and recorded["alias_moved"] is True
    moved = operator.alias_history(drafts["alias"])[-1]
    assert (moved.action, moved.from_bank_id, moved.to_bank_id) == (
        "move", before.id, recorded["bank_id"]
    )  # fmt: skip
    operator.close()


def test_bad_gate_a_requests_are_4xx_naming_the_field(registry_url, drafts, tmp_path):
    analyst = client(registry_url, "analyst")
    written = analyst.create_chunk(f"op-{drafts['tag']}", content(f"op-{drafts['tag']}")).latest
    analyst.close()
    app, _ = gate_a_app(registry_url, tmp_path, drafts)
    versions = [v.id for v in drafts["versions"]]
    with service_client(app) as http:
        not_draft = http.post(
            "/v1/gate-a-jobs", json=body(drafts, draft_version_ids=[*versions, written.id])
        )
        assert not_draft.status_code == 422 and "not a cold-start draft" in not_draft.text
        assert not_draft.json()["detail"][0]["loc"] == ["body", "draft_version_ids"]
        twice = http.post("/v1/gate-a-jobs", json=body(drafts, draft_version_ids=[versions[0]] * 2))
        assert twice.json()["detail"][0]["loc"] == ["body", "draft_version_ids"]
        small = http.post("/v1/gate-a-jobs", json=body(drafts, n_tasks=12))
        assert small.status_code == 422 and "rank deficient" in small.text
        assert small.json()["detail"][0]["loc"] == ["body", "task_ids"]
        unknown = http.post("/v1/gate-a-jobs", json=body(drafts, draft_version_ids=[987654]))
        assert unknown.status_code == 422 and "987654" in unknown.text
        assert http.post("/v1/gate-a-jobs", json=body(drafts, budget=0)).status_code == 422
        assert http.get("/v1/gate-a-jobs/gate-a-unknown").status_code == 404
        assert http.get("/v1/gate-a-jobs").json() == []
    reader = client(registry_url, "reader")
    assert reader.list_gate_runs(checkpoint_id=drafts["checkpoint"]) == []  # nothing opened
    with pytest.raises(NotFound):
        reader.get_alias(drafts["alias"])
    reader.close()


def run_cli(registry_url: str, argv: list[str], **env: str) -> int:
    """`intraskill gate ...` in this process with EVALUATOR_* settings in the environment."""
    settings = {
        "EVALUATOR_REGISTRY_URL": registry_url,
        "EVALUATOR_REGISTRY_TOKEN": TOKENS["evaluator"],
        "EVALUATOR_ENV_PRESET": "test",
        **env,
    }
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        return cli.main(argv)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_cold_start_cli_refuses_a_draft_that_is_not_cold_start(
    registry_url, drafts, tmp_path, capsys
):
    analyst = client(registry_url, "analyst")
    written = analyst.create_chunk(f"op-{drafts['tag']}", content(f"op-{drafts['tag']}")).latest
    analyst.close()
    argv = ["cold-start", "--checkpoint", drafts["checkpoint"], "--alias", drafts["alias"],
            "--draft", str(drafts["versions"][0].id), "--draft", str(written.id),
            "--out", str(tmp_path / "gate-a")]  # fmt: skip
    assert run_cli(registry_url, argv) == 1
    assert "is not a cold-start draft" in capsys.readouterr().err
    assert not (tmp_path / "gate-a").exists()  # refused before any rollout


@pytest.mark.slow
def test_cold_start_cli_with_the_tiny_model(registry_url, tmp_path, capsys):
    from shared.runtime.agent.models import build_tiny_model

    path = build_tiny_model(tmp_path / "model", seed=0)
    tag = uuid.uuid4().hex[:6]
    trainer, analyst = client(registry_url, "trainer"), client(registry_url, "analyst")
    trainer.create_checkpoint(f"tiny-{tag}", uri=f"file://{path}", step=0, round=0)
    drafts = [
        analyst.create_chunk(
            f"t{i}-{tag}", content(f"t{i}-{tag}"), source=ChunkSource.cold_start
        ).latest.id
        for i in range(3)
    ]
    trainer.close()
    analyst.close()
    argv = ["cold-start", "--checkpoint", f"tiny-{tag}", "--alias", f"cur-{tag}",
            "--out", str(tmp_path / "gate-a"), "--json"]  # fmt: skip
    for draft in drafts:
        argv += ["--draft", str(draft)]
    code = run_cli(
        registry_url, argv, EVALUATOR_MAX_TURNS="2", EVALUATOR_CONCURRENCY="20",
        EVALUATOR_REGISTRY_TOKEN=TOKENS["evaluator"],
    )  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "complete" and result["paired"] == 20
    assert (tmp_path / "gate-a" / "records.jsonl").is_file()
    assert (tmp_path / "gate-a" / "gate.json").is_file()
    reader = client(registry_url, "reader")
    run = reader.get_gate_run(result["registry"]["gate_run_id"])
    assert run.kind == GateKind.gate_a and run.checkpoint_id == f"tiny-{tag}"
    assert run.identity.env_version.startswith("shopsim") and run.n_observations == 20
    s0 = reader.get_bank_by_alias(f"cur-{tag}")
    assert s0.id == result["registry"]["bank_id"] and s0.gate_decision_id == run.decision_id
    assert [f"{e.slug}@{e.version}" for e in s0.entries] == result["decision"]["selected"]
    reader.close()
