"""The analyst hardened as the registry is, tried as a new user and as an attacker would
(issue 34), against the real `intraskill analyst serve` process on loopback (the live
registry). Each test names the issue's item it holds to."""

from __future__ import annotations

import functools
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from registry_server import TOKENS

from shared.contracts.registry_api.client import RegistryClient
from tests.service_bodies import assert_bodies_are_limited_then_authenticated_then_parsed
from tests.service_servers import FrozenRegistry, analyst_serving, bearer


@pytest.fixture(scope="module")
def analyst(registry_url, tmp_path_factory):
    with analyst_serving(registry_url, tmp_path_factory.mktemp("analyst-hardening")) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("/v1/all-wrong-groups", "trainer"),
        ("/v1/compile-jobs", "trainer"),
        ("/v1/cold-start-jobs", "operator"),
    ],
)
def test_1_bodies_are_limited_then_authenticated_then_parsed(analyst, path, role):
    assert_bodies_are_limited_then_authenticated_then_parsed(analyst, path, bearer(role))


@pytest.fixture(scope="module")
def references(registry_url) -> dict:
    """A checkpoint and a frozen (empty) bank the registry has."""
    tag = uuid.uuid4().hex[:6]
    with RegistryClient(registry_url, TOKENS["trainer"]) as trainer:
        trainer.create_checkpoint(f"base-{tag}", uri="file:///procedural", step=0, round=0)
    with RegistryClient(registry_url, TOKENS["operator"]) as operator:
        bank = operator.create_bank(())
        operator.freeze_bank(bank.id)
    return {"checkpoint_id": f"base-{tag}", "bank_id": bank.id, "tag": tag}


def compile_body(references: dict, **changes) -> dict:
    policy = {"checkpoint_id": references["checkpoint_id"], "backend": "procedural"}
    body = {"run_id": f"run-{references['tag']}", "round": 0, "bank_id": references["bank_id"],
            "policy": policy, "env_preset": "test"}  # fmt: skip
    return {**body, **changes}


def cold_start_body(references: dict, **changes) -> dict:
    policy = {"checkpoint_id": references["checkpoint_id"], "backend": "procedural"}
    body = {"run_id": f"cs-{references['tag']}", "policy": policy, "env_preset": "test",
            "n_tasks": 12, "gate_a": False}  # fmt: skip
    return {**body, **changes}


def group_body(index: int, **changes) -> dict:
    body = {
        "run_id": "run-pages", "round": 0, "step": 1, "group_index": index,
        "task_id": "task-000007", "bank_id": 1, "bank_hash": "a" * 64,
        "treatment": {"mode": "assisted", "inclusion": [1, 0]},
        "siblings": [{"reward": 0.25, "trajectory_uri": "file:///t/0.json"}] * 8,
    }  # fmt: skip
    return {**body, **changes}


def test_3_probes_answer_at_once_while_submissions_wait_on_a_frozen_registry(tmp_path):
    """60 compile submissions wait on a registry that never answers (above the 40-thread
    pool): /healthz answers within seconds, and each submission ends in a 503 with
    Retry-After (its references could not be checked)."""
    frozen = FrozenRegistry()
    references = {"checkpoint_id": "c", "bank_id": 1, "tag": "frozen"}
    try:
        with analyst_serving(frozen.url, tmp_path) as url:

            def submit(_):
                return httpx.post(f"{url}/v1/compile-jobs", json=compile_body(references),
                                  headers=bearer("trainer"), timeout=180)  # fmt: skip

            with ThreadPoolExecutor(60) as pool:
                waiting = [pool.submit(submit, n) for n in range(60)]
                time.sleep(1.0)
                started = time.monotonic()
                alive = httpx.get(f"{url}/healthz", timeout=60)
                health_s = time.monotonic() - started
                ready = httpx.get(f"{url}/readyz", timeout=60)
                answers = [future.result() for future in waiting]
    finally:
        frozen.close()
    assert alive.status_code == 200 and health_s < 3.0, health_s
    assert ready.status_code == 503 and ready.json()["checks"]["registry"] != "ok"
    for answer in answers:
        assert answer.status_code == 503 and answer.headers["retry-after"].isdigit(), answer.text


def test_4_a_cold_start_retried_after_a_restart_writes_no_card_twice(
    registry_url, references, tmp_path
):
    """A cold start that stored its cards, then lost its process before the job was recorded
    as done (its job.json still says running, as a SIGKILL at that moment leaves it): the
    retry with the same key runs again as a new job (the interruption released the key) and
    replays every card instead of writing it again."""
    body = cold_start_body(references, run_id=f"cs-restart-{references['tag']}")
    keyed = {**bearer("operator"), "Idempotency-Key": "cold-start-once"}
    with RegistryClient(registry_url, TOKENS["analyst"]) as registry:
        before = len(registry.list_cards())
        with analyst_serving(registry_url, tmp_path) as url:
            first = httpx.post(f"{url}/v1/cold-start-jobs", json=body, headers=keyed, timeout=120)
            assert first.status_code == 202, first.text
            done = wait_for(url, first.json()["id"])
        assert done["status"] == "succeeded", done["error"]
        written = len(registry.list_cards()) - before
        assert written == done["result"]["n_cards"] > 0
        job_file = tmp_path / "data" / "jobs" / done["id"] / "job.json"
        killed = {**json.loads(job_file.read_text()), "status": "running", "result": None}
        job_file.write_text(json.dumps(killed))

        with analyst_serving(registry_url, tmp_path) as url:
            interrupted = httpx.get(f"{url}/v1/jobs/{done['id']}", headers=bearer("reader"))
            assert interrupted.json()["error"] == "interrupted"
            retry = httpx.post(f"{url}/v1/cold-start-jobs", json=body, headers=keyed, timeout=120)
            assert retry.status_code == 202 and retry.json()["id"] != done["id"], retry.text
            again = wait_for(url, retry.json()["id"])
        assert again["status"] == "succeeded", again["error"]
        assert again["result"]["n_cards"] == done["result"]["n_cards"]
        assert len(registry.list_cards()) - before == written  # not one card twice


def wait_for(url: str, job_id: str, timeout: float = 1200) -> dict:
    deadline = time.monotonic() + timeout
    while (job := httpx.get(f"{url}/v1/jobs/{job_id}", headers=bearer("reader"),
                            timeout=60).json())["status"] in ("queued", "running"):  # fmt: skip
        assert time.monotonic() < deadline, job
        time.sleep(1.0)
    return job


def test_5_idempotency_keys_are_the_callers_own_and_bound_to_the_body(analyst, references):
    post = functools.partial(httpx.post, f"{analyst}/v1/cold-start-jobs", timeout=120)
    keyed = {**bearer("operator"), "Idempotency-Key": "cold-start-5"}
    body = cold_start_body(references, run_id=f"cs5-{references['tag']}")
    first = post(json=body, headers=keyed)
    assert first.status_code == 202, first.text
    assert post(json=body, headers=keyed).json()["id"] == first.json()["id"]  # replay
    other_body = post(json={**body, "n_tasks": 13}, headers=keyed)
    assert other_body.status_code == 409, other_body.text
    other_caller = post(
        json=body, headers={**bearer("operator", second=True), "Idempotency-Key": "cold-start-5"}
    )
    assert other_caller.status_code == 202 and other_caller.json()["id"] != first.json()["id"]


UNENCODABLE = [
    ("/v1/all-wrong-groups", "trainer", "task_id", '"\\ud800"'),
    ("/v1/all-wrong-groups", "trainer", "task_id", "NaN"),
    ("/v1/all-wrong-groups", "trainer", "reward", "NaN"),
    ("/v1/all-wrong-groups", "trainer", "reward", "Infinity"),
    ("/v1/compile-jobs", "trainer", "env_preset", '"\\udfff"'),
    ("/v1/cold-start-jobs", "operator", "alias", "NaN"),
    ("/v1/cold-start-jobs", "operator", "alias", '"\\ud800"'),
]


@pytest.mark.parametrize(("path", "role", "field", "raw"), UNENCODABLE)
def test_7_input_no_answer_can_echo_is_a_422_not_a_500(analyst, references, path, role, field,
                                                       raw):  # fmt: skip
    if path == "/v1/all-wrong-groups":
        body = group_body(0)
        if field == "reward":
            body["siblings"] = [{"reward": "RAW"}] * 8
        else:
            body[field] = "RAW"
    elif path == "/v1/compile-jobs":
        body = compile_body(references, **{field: "RAW"})
    else:
        body = cold_start_body(references, **{field: "RAW"})
    content = json.dumps(body).replace('"RAW"', raw)
    answer = httpx.post(analyst + path, content=content, timeout=120,
                        headers={**bearer(role), "Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"][-1] == field


@pytest.mark.parametrize("run_id", ["/etc/passwd", "/tmp/x", "../jobs/x", "a/b", ""])
def test_8_a_funnel_run_id_is_an_id_not_a_path(analyst, run_id):
    answer = httpx.get(f"{analyst}/v1/funnel", params={"run_id": run_id, "round": 0},
                       headers=bearer("reader"), timeout=60)  # fmt: skip
    assert answer.status_code == 422, answer.text


def test_8_an_unknown_run_has_an_empty_funnel_whatever_exists_on_the_host(analyst):
    for run_id in ("etc", "tmp", "no-such-run"):
        answer = httpx.get(f"{analyst}/v1/funnel", params={"run_id": run_id, "round": 0},
                           headers=bearer("reader"), timeout=60)  # fmt: skip
        assert answer.status_code == 200 and answer.json()["all_wrong_groups"] == 0


def test_9_what_a_job_needs_is_checked_at_submit(analyst, references):
    post = functools.partial(httpx.post, timeout=120)
    compile_ = f"{analyst}/v1/compile-jobs"
    cold = f"{analyst}/v1/cold-start-jobs"
    policy = {"checkpoint_id": references["checkpoint_id"], "backend": "procedural"}
    cases = [
        (compile_, "trainer", compile_body(references, policy={**policy,
                                                               "checkpoint_id": "nope"}),
         ["body", "policy", "checkpoint_id"]),
        (compile_, "trainer", compile_body(references, bank_id=2**31 - 2), ["body", "bank_id"]),
        (compile_, "trainer", compile_body(references, env_preset="huge"),
         ["body", "env_preset"]),
        (compile_, "trainer", compile_body(references, policy={**policy, "backend": "openai"}),
         ["body", "policy"]),
        (compile_, "trainer", compile_body(references, policy={
            **policy, "backend": "transformers", "weights_uri": "file:///no/such/weights"}),
         ["body", "policy", "weights_uri"]),
        (cold, "operator", cold_start_body(references, gate_a=True, gate_a_tasks=21),
         ["body", "gate_a_tasks"]),  # the test world's val split has 20 tasks
        (cold, "operator", cold_start_body(references, policy={**policy,
                                                               "checkpoint_id": "nope"}),
         ["body", "policy", "checkpoint_id"]),
    ]  # fmt: skip
    for url, role, body, loc in cases:
        answer = post(url, json=body, headers=bearer(role))
        assert answer.status_code == 422, (loc, answer.text)
        assert answer.json()["detail"][0]["loc"][: len(loc)] == loc, answer.text


def test_10_group_listings_are_paginated(analyst):
    for index in range(30):
        answer = httpx.post(f"{analyst}/v1/all-wrong-groups", json=group_body(index),
                            headers=bearer("trainer"), timeout=60)  # fmt: skip
        assert answer.status_code in (200, 201), answer.text
    read = functools.partial(httpx.get, f"{analyst}/v1/all-wrong-groups",
                             headers=bearer("reader"), timeout=60)  # fmt: skip
    page = read(params={"run_id": "run-pages", "limit": 10})
    assert len(page.json()) == 10 and page.headers["x-total-count"] == "30"
    assert [g["request"]["group_index"] for g in page.json()] == list(range(10))
    tail = read(params={"run_id": "run-pages", "limit": 10, "offset": 25}).json()
    assert [g["request"]["group_index"] for g in tail] == list(range(25, 30))
    assert read(params={"limit": 100_000}).status_code == 422


def test_10_one_roles_burst_is_bounded_with_429_and_retry_after(analyst, references):
    answers = []
    for index in range(40):
        body = cold_start_body(references, run_id=f"burst-{index}-{references['tag']}")
        answers.append(httpx.post(f"{analyst}/v1/cold-start-jobs", json=body,
                                  headers=bearer("operator"), timeout=120))  # fmt: skip
        if answers[-1].status_code != 202:
            break
    refused = answers[-1]
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"].isdigit()
    # the trainer's lane is its own: a group still goes in
    group = httpx.post(f"{analyst}/v1/all-wrong-groups", json=group_body(99),
                       headers=bearer("trainer"), timeout=60)  # fmt: skip
    assert group.status_code in (200, 201)


def test_10_one_trainer_writes_at_most_its_cap_of_groups_even_across_a_restart(
    registry_url, tmp_path
):
    """With ANALYST_MAX_GROUPS_PER_CALLER=3 a trainer's fourth new group is a 429 naming the
    setting, before and after a restart (the count is kept with the groups); a replay of a
    stored group still answers 200, and another trainer's token has a cap of its own."""
    capped = {"ANALYST_MAX_GROUPS_PER_CALLER": "3"}
    trainer, other = bearer("trainer"), bearer("trainer", second=True)

    def post(url: str, index: int, headers: dict) -> httpx.Response:
        return httpx.post(f"{url}/v1/all-wrong-groups", json=group_body(index, run_id="run-cap"),
                          headers=headers, timeout=60)  # fmt: skip

    with analyst_serving(registry_url, tmp_path, capped) as url:
        written = [post(url, index, trainer).status_code for index in range(3)]
        over = post(url, 3, trainer)
        replay = post(url, 0, trainer)
        others = post(url, 3, other)
    with analyst_serving(registry_url, tmp_path, capped) as url:
        after_restart = post(url, 4, trainer)
        listing = httpx.get(f"{url}/v1/all-wrong-groups", params={"run_id": "run-cap"},
                            headers=bearer("reader"), timeout=60)  # fmt: skip
    assert written == [201, 201, 201]
    assert over.status_code == 429 and "ANALYST_MAX_GROUPS_PER_CALLER" in over.text, over.text
    assert replay.status_code == 200, replay.text
    assert others.status_code == 201, others.text
    assert after_restart.status_code == 429, after_restart.text
    assert listing.headers["x-total-count"] == "4"


def test_11_readyz_asks_the_registry_whether_it_accepts_the_services_token(registry_url, tmp_path):
    wrong = {"ANALYST_REGISTRY_TOKEN": "not-a-registry-token"}
    with analyst_serving(registry_url, tmp_path, wrong) as url:
        ready = httpx.get(f"{url}/readyz", timeout=60)
    assert ready.status_code == 503 and ready.headers["retry-after"].isdigit(), ready.text
    assert ready.json()["checks"]["registry"] == "ok"
    assert "refuses ANALYST_REGISTRY_TOKEN (401)" in ready.json()["checks"]["registry_token"]


def test_11_flags_and_numbers_are_strict(analyst, references):
    for field, value in (("gate_a", "yes"), ("n_tasks", True), ("n_tasks", "12")):
        answer = httpx.post(
            f"{analyst}/v1/cold-start-jobs",
            headers=bearer("operator"),
            json=cold_start_body(references, **{field: value}),
            timeout=60,
        )
        assert answer.status_code == 422, (field, value, answer.text)
        assert answer.json()["detail"][0]["loc"][-1] == field
    group = httpx.post(f"{analyst}/v1/all-wrong-groups", headers=bearer("trainer"),
                       json=group_body(0, round=True), timeout=60)  # fmt: skip
    assert group.status_code == 422, group.text


def test_11_a_group_names_its_retry_trace_inside_the_data_folder_not_by_a_server_path(
    analyst, references, registry_url
):
    """A compile retries the group and records where the retry's trace lies; a reader gets that
    place relative to the analyst's data folder (`jobs/<job>/traces/<episode>.json`), in the
    listing and the single read alike, never `file:///<a path on the server>`."""
    round_ = 20_000 + uuid.uuid4().int % 10**6  # a round of its own: no other test's cards
    with RegistryClient(registry_url, TOKENS["evaluator"]) as evaluator:
        bank = evaluator.create_bank([], round=round_)
        evaluator.freeze_bank(bank.id)
        bank = evaluator.get_bank(bank.id)
    run_id = f"trace-{references['tag']}"
    group = group_body(0, run_id=run_id, round=round_, task_id="task-000001", bank_id=bank.id,
                       bank_hash=bank.content_hash,
                       treatment={"mode": "assisted_empty", "inclusion": []})  # fmt: skip
    stored = httpx.post(f"{analyst}/v1/all-wrong-groups", json=group, headers=bearer("trainer"),
                        timeout=60)  # fmt: skip
    assert stored.status_code == 201, stored.text
    job = httpx.post(f"{analyst}/v1/compile-jobs", headers=bearer("trainer"), timeout=120,
                     json=compile_body(references, run_id=run_id, round=round_,
                                       bank_id=bank.id))  # fmt: skip
    assert job.status_code == 202, job.text
    done = wait_for(analyst, job.json()["id"])
    assert done["status"] == "succeeded", done["error"]
    read = functools.partial(httpx.get, headers=bearer("reader"), timeout=60)
    listed = read(f"{analyst}/v1/all-wrong-groups", params={"run_id": run_id}).json()
    single = read(f"{analyst}/v1/all-wrong-groups/{stored.json()['id']}").json()
    uri = listed[0]["retry_trace_uri"]
    assert uri == single["retry_trace_uri"]
    assert uri.startswith(f"jobs/{done['id']}/traces/") and uri.endswith(".json"), uri
