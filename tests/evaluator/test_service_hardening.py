"""The evaluator hardened as the registry is, tried as a new user and as an attacker would
(issue 34), against the real `intraskill gate serve` process on loopback (procedural TEST
DOUBLE backend, the live registry). Each test names the issue's item it holds to."""

from __future__ import annotations

import functools
import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from gate_service_support import client, content

from shared.contracts.registry_api.schemas import ChunkSource, GateStatus
from tests.live_servers import started_server
from tests.service_bodies import assert_bodies_are_limited_then_authenticated_then_parsed
from tests.service_servers import (
    START_TIMEOUT_S,
    FrozenRegistry,
    bearer,
    evaluator_env,
    evaluator_serving,
)


@pytest.fixture(scope="module")
def evaluator(registry_url, tmp_path_factory):
    with evaluator_serving(registry_url, tmp_path_factory.mktemp("evaluator-hardening")) as url:
        yield url


@pytest.fixture
def drafts(registry_url) -> dict:
    """Two cold-start drafts and a base checkpoint: a Gate A the `val` split (20 tasks) fits."""
    tag = uuid.uuid4().hex[:6]
    with client(registry_url, "trainer") as trainer, client(registry_url, "analyst") as analyst:
        checkpoint = f"base-{tag}"
        trainer.create_checkpoint(checkpoint, uri="file:///procedural", step=0, round=0)
        versions = [
            analyst.create_chunk(
                f"h{i}-{tag}", content(f"h{i}-{tag}"), source=ChunkSource.cold_start
            ).latest
            for i in range(2)
        ]
    return {
        "checkpoint_id": checkpoint,
        "draft_version_ids": [version.id for version in versions],
        "alias": f"cur-{tag}",
    }


@pytest.mark.parametrize("path", ["/v1/gate-jobs", "/v1/gate-a-jobs", "/v1/eval-jobs"])
def test_1_bodies_are_limited_then_authenticated_then_parsed(evaluator, path):
    role = {"/v1/gate-jobs": "trainer", "/v1/gate-a-jobs": "analyst"}.get(path, "operator")
    assert_bodies_are_limited_then_authenticated_then_parsed(evaluator, path, bearer(role))


def _start(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    service = started_server(["gate", "serve"], env, log, timeout=START_TIMEOUT_S)
    return service.process, service.url


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return value


def test_2_an_evaluator_killed_mid_gate_leaves_no_open_gate_run_after_its_next_start(
    registry_url, drafts, tmp_path
):
    """SIGKILL while Gate A's rollouts run (each procedural turn takes 0.25 s, so the gate
    runs for a minute): the run is open in the registry and `job.json` names it; the next
    start closes it as failed, with a note saying it was abandoned, and the job reads
    interrupted."""
    slow = {"EVALUATOR_BACKEND_OPTIONS": json.dumps({"turn_delay_s": 0.25})}
    env = evaluator_env(registry_url, tmp_path, slow)
    process, url = _start(env, tmp_path / "first.log")
    try:
        keyed = {**bearer("analyst"), "Idempotency-Key": "cold-start:restart"}
        answer = httpx.post(f"{url}/v1/gate-a-jobs", json=drafts, headers=keyed, timeout=120)
        assert answer.status_code == 202, answer.text
        location = url + answer.headers["location"]

        def opened_run():
            job = httpx.get(location, headers=bearer("reader"), timeout=60).json()
            assert job["status"] in ("queued", "running"), job
            return job.get("gate_run_id")

        run_id = _until(opened_run, 120, "the gate job never opened its registry run")
    finally:
        process.kill()
        process.wait()
    job_file = tmp_path / "jobs" / answer.json()["id"] / "job.json"
    assert json.loads(job_file.read_text())["gate_run_id"] == run_id
    with client(registry_url, "reader") as registry:
        assert registry.get_gate_run(run_id).status == GateStatus.open

        process, url = _start(env, tmp_path / "second.log")
        try:
            run = _until(
                lambda: (r := registry.get_gate_run(run_id)).status != GateStatus.open and r,
                60,
                "the restarted evaluator left the gate run open",
            )
            job = httpx.get(location.replace(location.split("/v1")[0], url),
                            headers=bearer("reader"), timeout=60).json()  # fmt: skip
            # item 5: the interruption released the key: the retry is a new job, not the
            # failed one
            retry = httpx.post(f"{url}/v1/gate-a-jobs", json=drafts, headers=keyed, timeout=120)
            assert retry.status_code == 202 and retry.json()["id"] != job["id"], retry.text
        finally:
            process.kill()
            process.wait()
    assert run.status == GateStatus.failed
    assert run.note.startswith("abandoned:") and job["id"] in run.note, run.note
    assert (job["status"], job["error"], job["gate_run_id"]) == ("failed", "interrupted", run_id)
    assert not registry_open_runs(registry_url, drafts["checkpoint_id"])


def registry_open_runs(registry_url: str, checkpoint_id: str) -> list:
    with client(registry_url, "reader") as registry:
        return registry.list_gate_runs(status=GateStatus.open, checkpoint_id=checkpoint_id)


def test_3_probes_answer_at_once_while_every_pool_thread_waits_on_a_frozen_registry(tmp_path):
    """60 refits and gate POSTs wait on a registry that never answers (above the 40-thread
    pool): /healthz answers within a second, /readyz says not ready within its 2 s budget,
    and each waiting request ends in a 503 with Retry-After within seconds, not ~50 s."""
    from concurrent.futures import ThreadPoolExecutor

    frozen = FrozenRegistry()
    try:
        with evaluator_serving(frozen.url, tmp_path) as url:

            def refit(_):
                started = time.monotonic()
                answer = httpx.post(f"{url}/v1/refits", json={"gate_run_id": 1},
                                    headers=bearer("trainer"), timeout=120)  # fmt: skip
                return answer, time.monotonic() - started

            with ThreadPoolExecutor(60) as pool:
                waiting = [pool.submit(refit, n) for n in range(60)]
                time.sleep(1.0)  # every pool thread now waits on the registry
                started = time.monotonic()
                alive = httpx.get(f"{url}/healthz", timeout=60)
                health_s = time.monotonic() - started
                started = time.monotonic()
                ready = httpx.get(f"{url}/readyz", timeout=60)
                ready_s = time.monotonic() - started
                answers = [future.result() for future in waiting]
            gate = httpx.post(
                f"{url}/v1/gate-jobs", json={"round": 0, "checkpoint_id": "c"},
                headers=bearer("trainer"), timeout=120,
            )  # fmt: skip
    finally:
        frozen.close()
    assert alive.status_code == 200 and health_s < 3.0, health_s  # 30 s before the fix
    assert ready.status_code == 503 and ready_s < 6.0, (ready_s, ready.text)
    assert ready.json()["checks"]["registry"].startswith("unreachable")
    for answer, seconds in answers:
        assert answer.status_code == 503 and answer.headers["retry-after"].isdigit(), answer.text
        assert seconds < 60, seconds  # the pool's 40 threads, each ~7 s at most, then the rest
    assert gate.status_code == 503 and gate.headers["retry-after"].isdigit(), gate.text


def _eval_body(checkpoint: str, n_tasks: int = 2) -> dict:
    return {
        "conditions": [{"name": "base/bare", "checkpoint_id": checkpoint}],
        "split": "test",
        "n_tasks": n_tasks,
        "resamples": 100,
    }


def test_5_idempotency_keys_are_the_callers_own_and_bound_to_the_body(
    evaluator, registry_url, drafts
):
    post = functools.partial(httpx.post, f"{evaluator}/v1/eval-jobs", timeout=120)
    keyed = {**bearer("operator"), "Idempotency-Key": "eval-once"}
    body = _eval_body(drafts["checkpoint_id"])
    first = post(json=body, headers=keyed)
    assert first.status_code == 202, first.text
    replay = post(json=body, headers=keyed)
    assert replay.status_code == 202 and replay.json()["id"] == first.json()["id"]
    other_body = post(json=_eval_body(drafts["checkpoint_id"], 3), headers=keyed)
    assert other_body.status_code == 409, other_body.text
    other_caller = post(
        json=body, headers={**bearer("operator", second=True), "Idempotency-Key": "eval-once"}
    )
    assert other_caller.status_code == 202 and other_caller.json()["id"] != first.json()["id"]


@pytest.mark.parametrize(
    "alias", ["current?limit=1", "current/history", "cur\u0000rent", "../current", "Current"]
)
def test_6_an_alias_is_a_slug_before_it_reaches_a_registry_url(evaluator, drafts, alias):
    body = json.dumps({**drafts, "alias": "ALIAS"}).replace('"ALIAS"', json.dumps(alias))
    answer = httpx.post(
        f"{evaluator}/v1/gate-a-jobs", content=body,
        headers={**bearer("analyst"), "Content-Type": "application/json"}, timeout=120,
    )  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"][-1] == "alias"


# Input Python's JSON parser accepts and no answer can echo as is (NaN, Infinity, a lone
# surrogate), on each route that echoes a field, and a split the world does not have.
UNENCODABLE = [
    ("/v1/gate-a-jobs", "analyst", '{"checkpoint_id": "c", "draft_version_ids": [1], '
     '"task_ids": [NaN]}'),
    ("/v1/gate-a-jobs", "analyst", '{"checkpoint_id": "c", "draft_version_ids": [1], '
     '"task_ids": ["\\ud800"]}'),
    ("/v1/gate-jobs", "trainer", '{"checkpoint_id": "c", "round": Infinity}'),
    ("/v1/eval-jobs", "operator", '{"conditions": [{"name": "a", "checkpoint_id": "c", '
     '"bank_alias": NaN}]}'),
    ("/v1/eval-jobs", "operator", '{"conditions": [{"name": "a", "checkpoint_id": "c", '
     '"bank_alias": "\\udc00"}]}'),
    ("/v1/eval-jobs", "operator", '{"conditions": [{"name": "a", "checkpoint_id": "c"}], '
     '"split": "holdout"}'),
]  # fmt: skip


@pytest.mark.parametrize(("path", "role", "body"), UNENCODABLE)
def test_7_input_no_answer_can_echo_is_a_422_not_a_500(evaluator, path, role, body):
    answer = httpx.post(
        evaluator + path, content=body,
        headers={**bearer(role), "Content-Type": "application/json"}, timeout=120,
    )  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"]


def test_9_what_a_job_needs_is_checked_at_submit(evaluator, registry_url, drafts):
    post = functools.partial(httpx.post, timeout=120)
    unknown = post(f"{evaluator}/v1/gate-a-jobs", headers=bearer("analyst"),
                   json={**drafts, "checkpoint_id": "no-such-checkpoint"})  # fmt: skip
    assert unknown.status_code == 422, unknown.text
    assert unknown.json()["detail"][0]["loc"] == ["body", "checkpoint_id"]
    unknown_gate = post(f"{evaluator}/v1/gate-jobs", headers=bearer("trainer"),
                        json={"round": 0, "checkpoint_id": "no-such-checkpoint"})  # fmt: skip
    assert unknown_gate.status_code == 422, unknown_gate.text
    assert unknown_gate.json()["detail"][0]["loc"] == ["body", "checkpoint_id"]
    for alias in ("production", "Pr0duction"):
        protected = post(f"{evaluator}/v1/gate-a-jobs", headers=bearer("analyst"),
                         json={**drafts, "alias": alias.lower()})  # fmt: skip
        assert protected.status_code == 422, protected.text
        assert protected.json()["detail"][0]["loc"] == ["body", "alias"]
    # an eval job exists but has no gate rollouts; a Gate A job is not the trainer's to reuse:
    # both read as unknown, so the answer does not say which ids exist (item 11)
    eval_job = post(f"{evaluator}/v1/eval-jobs", headers=bearer("operator"),
                    json=_eval_body(drafts["checkpoint_id"])).json()  # fmt: skip
    gate_a = post(f"{evaluator}/v1/gate-a-jobs", headers=bearer("analyst"),
                  json={**drafts, "move_alias": False}).json()  # fmt: skip
    answers = {}
    for earlier in (eval_job["id"], gate_a["id"], "gate-000000000000"):
        reuse = post(
            f"{evaluator}/v1/gate-jobs",
            headers=bearer("trainer"),
            json={"round": 0, "checkpoint_id": drafts["checkpoint_id"], "bare_from_job": earlier},
        )
        assert reuse.status_code == 422, reuse.text
        answers[earlier] = reuse.json()["detail"][0]["msg"].replace(earlier, "ID")
    assert len(set(answers.values())) == 1, answers


def test_9_bare_rollouts_come_only_from_a_gate_job_of_the_same_kind_that_has_them(
    registry_url, drafts, tmp_path
):
    """Two earlier jobs as a restart finds them in the jobs folder: a gate job whose rollouts
    are gone (no records file: it never wrote one, or its folder was pruned) and a finished
    Gate A job with its records. A trainer's gate naming either is a 422 about
    `bare_from_job` at submit: not a 202 that fails when the job reads the records (item 9),
    nor one that reuses Gate A's rollouts, which are the analyst's (item 11)."""
    earlier = {"gate-0000000000a1": ("gate", False), "gate-a-0000000000a2": ("gate-a", True)}
    for job_id, (kind, has_records) in earlier.items():
        folder = tmp_path / "jobs" / job_id
        folder.mkdir(parents=True)
        job = {"id": job_id, "kind": kind, "status": "succeeded",
               "request": {"checkpoint_id": drafts["checkpoint_id"]}}  # fmt: skip
        (folder / "job.json").write_text(json.dumps(job))
        if has_records:
            (folder / "records.jsonl").write_text("")
    answers = {}
    with evaluator_serving(registry_url, tmp_path) as url:
        for job_id in earlier:
            body = {"round": 0, "checkpoint_id": drafts["checkpoint_id"], "bare_from_job": job_id}
            answers[job_id] = httpx.post(f"{url}/v1/gate-jobs", json=body,
                                         headers=bearer("trainer"), timeout=120)  # fmt: skip
    for job_id, answer in answers.items():
        detail = answer.json()["detail"]  # a list naming the field, not a registry's refusal
        assert answer.status_code == 422 and isinstance(detail, list), (job_id, answer.text)
        assert detail[0]["loc"] == ["body", "bare_from_job"], answer.text


def test_10_one_roles_burst_is_bounded_and_does_not_starve_another_role(registry_url, tmp_path):
    """The analyst's Gate A jobs queue up to 16 (the shipped max_queued), then 429 with
    Retry-After; an operator's evaluation submitted behind them starts after at most one
    more Gate A job (the workers take the roles' lanes in turn), not after all of them."""
    slow = {"EVALUATOR_BACKEND_OPTIONS": json.dumps({"turn_delay_s": 0.05})}
    tag = uuid.uuid4().hex[:6]
    with client(registry_url, "trainer") as trainer, client(registry_url, "analyst") as analyst:
        checkpoint = f"base-{tag}"
        trainer.create_checkpoint(checkpoint, uri="file:///procedural", step=0, round=0)
        versions = [analyst.create_chunk(f"q{i}-{tag}", content(f"q{i}-{tag}"),
                                         source=ChunkSource.cold_start).latest
                    for i in range(2)]  # fmt: skip
    gate_a = {"checkpoint_id": checkpoint, "draft_version_ids": [v.id for v in versions],
              "move_alias": False}  # fmt: skip
    with evaluator_serving(registry_url, tmp_path, slow) as url:
        post = functools.partial(httpx.post, timeout=120)
        accepted, refused = [], None
        for _ in range(30):
            answer = post(f"{url}/v1/gate-a-jobs", json=gate_a, headers=bearer("analyst"))
            if answer.status_code != 202:
                refused = answer
                break
            accepted.append(answer.json()["id"])
        evaluation = post(f"{url}/v1/eval-jobs", json=_eval_body(checkpoint),
                          headers=bearer("operator"))  # fmt: skip
        assert evaluation.status_code == 202, evaluation.text
        read = functools.partial(httpx.get, headers=bearer("reader"), timeout=60)
        location = url + evaluation.headers["location"]
        _until(lambda: read(location).json()["status"] != "queued", 600,
               "the evaluation never started")  # fmt: skip
        started = [job for job in read(f"{url}/v1/gate-a-jobs").json()
                   if job["started_at"] is not None]  # fmt: skip
    assert refused is not None and refused.status_code == 429, refused
    assert refused.headers["retry-after"].isdigit()
    assert len(accepted) == 17  # one running, 16 waiting
    assert len(started) <= 2, [job["id"] for job in started]


def test_11_flags_and_numbers_are_strict_and_refits_say_what_went_wrong(evaluator, drafts):
    post = functools.partial(httpx.post, timeout=120)
    for field, value in (("move_alias", "yes"), ("move_alias", 1), ("round", True),
                         ("round", "0"), ("mask_seed", 1.0)):  # fmt: skip
        answer = post(f"{evaluator}/v1/gate-a-jobs", headers=bearer("analyst"),
                      json={**drafts, field: value})  # fmt: skip
        assert answer.status_code == 422, (field, value, answer.text)
        assert answer.json()["detail"][0]["loc"][-1] == field
    missing = post(f"{evaluator}/v1/refits", json={"gate_run_id": 2**31 - 2},
                   headers=bearer("trainer"))  # fmt: skip
    assert missing.status_code == 404, missing.text
    refused = post(f"{evaluator}/v1/refits", json={"gate_run_id": 2**40},
                   headers=bearer("trainer"))  # fmt: skip
    assert refused.status_code == 422, refused.text


def test_11_readyz_asks_the_registry_whether_it_accepts_the_services_token(registry_url, tmp_path):
    wrong = {"EVALUATOR_REGISTRY_TOKEN": "not-a-registry-token"}
    with evaluator_serving(registry_url, tmp_path, wrong) as url:
        ready = httpx.get(f"{url}/readyz", timeout=60)
    assert ready.status_code == 503 and ready.headers["retry-after"].isdigit(), ready.text
    checks = ready.json()["checks"]
    assert checks["registry"] == "ok"
    assert "refuses EVALUATOR_REGISTRY_TOKEN (401)" in checks["registry_token"]
