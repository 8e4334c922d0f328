"""The registry as a real `intraskill registry serve` process, on Postgres and on SQLite.

Each test pins a defect found by driving a live server with independent clients (issue 8):
contention, faults and hostile input must give 4xx/503 answers, never a hang, a 500 or lost data.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import psycopg
import pytest
from live_server import (
    DATABASES,
    EXPIRED_TOKEN,
    INTRASKILL,
    REPO_ROOT,
    REVOKED_TOKEN,
    LiveRegistry,
    cluster_tools_missing,
    concurrently,
    serve_as_app_role,
    serve_registry,
    status_counts,
    throwaway_cluster,
    unique,
)
from registry_support import TOKENS, chunk_content, gate_protocol, headers

from shared.contracts.registry_api.schemas import REWARD_COMPONENTS, Role
from tests.live_servers import scratch_database, scratch_postgres_database


def two_frozen_banks(registry: LiveRegistry) -> list[dict]:
    return [registry.bank([registry.chunk(unique(f"c{i}"))["latest"]["id"]]) for i in range(2)]


# ---------------------------------------------------------------- 1. contention


def test_two_hundred_alias_moves_with_one_etag_exactly_one_wins(registry: LiveRegistry):
    """Defect 1: past 40 contending writers (the thread pool) the server hung for good."""
    banks = two_frozen_banks(registry)
    name = unique("current")
    alias = registry.ok(
        "POST", "/v1/aliases", json={"name": name, "bank_id": banks[0]["id"], "reason": "r"}
    )
    moves = [
        {
            "method": "PUT",
            "url": f"/v1/aliases/{name}",
            "json": {"bank_id": banks[1]["id"], "reason": f"mover {i}"},
            "headers": headers(Role.evaluator, **{"If-Match": alias["etag"]}),
        }
        for i in range(200)
    ]
    assert status_counts(concurrently(registry.url, moves)) == {200: 1, 412: 199}
    history = registry.ok("GET", f"/v1/aliases/{name}/history")["items"]
    assert [event["revision"] for event in history] == [1, 2]
    assert registry.call("GET", "/readyz").status_code == 200


@pytest.mark.parametrize("database", DATABASES)
def test_one_database_thread_serves_contended_writes_and_reads(database: str, tmp_path):
    """Issue 8: database work queues for a few threads (`db_threads`); with a single one,
    writers queued on one row and the reads behind them must all still be answered."""
    with (
        scratch_database(database, tmp_path) as url,
        serve_registry(url, db_threads="1") as registry,
    ):
        banks = two_frozen_banks(registry)
        name = unique("one-thread")
        registry.ok(
            "POST", "/v1/aliases", json={"name": name, "bank_id": banks[0]["id"], "reason": "r"}
        )
        move = {"method": "PUT", "url": f"/v1/aliases/{name}"}
        requests = [
            {
                **move,
                "json": {"bank_id": banks[(i + 1) % 2]["id"], "reason": f"mover {i}"},
                "headers": headers(Role.evaluator, **{"If-Match": "*"}),
            }
            for i in range(20)
        ] + [
            {"method": "GET", "url": "/v1/chunks", "headers": headers(Role.reader)}
            for _ in range(20)
        ]
        assert status_counts(concurrently(registry.url, requests, timeout_s=60)) == {200: 40}
        assert registry.ok("GET", f"/v1/aliases/{name}")["revision"] == 21


def test_fifty_same_key_posts_write_once(registry: LiveRegistry):
    """Defect 1 (same family): 50 same-key POSTs used to hang Postgres past the thread pool."""
    slug = unique("same-key")
    body = {"slug": slug, "content": chunk_content(slug)}
    posts = [
        {
            "method": "POST",
            "url": "/v1/chunks",
            "json": body,
            "headers": headers(Role.analyst, **{"Idempotency-Key": f"key-{slug}"}),
        }
        for _ in range(50)
    ]
    responses = concurrently(registry.url, posts)
    assert status_counts(responses) == {201: 50}
    assert len({response.json()["id"] for response in responses}) == 1
    assert (
        sum(response.headers.get("Idempotent-Replayed") == "true" for response in responses) == 49
    )


def test_concurrent_independent_writes_all_succeed_or_ask_to_retry(registry: LiveRegistry):
    """Defect 4: on SQLite 50 concurrent writes gave 39x500 ("database is locked")."""
    posts = [
        {
            "method": "POST",
            "url": "/v1/chunks",
            "json": {"slug": (slug := unique("indep")), "content": chunk_content(slug)},
            "headers": headers(Role.analyst),
        }
        for _ in range(50)
    ]
    responses = concurrently(registry.url, posts)
    counts = status_counts(responses)
    assert set(counts) <= {201, 503}, counts
    assert all(r.headers["Retry-After"] for r in responses if r.status_code == 503)
    assert counts.get(201, 0) >= 45, counts


# ---------------------------------------------------------------- 2-3. failed writes leave nothing


def test_a_failed_write_frees_its_idempotency_key(registry: LiveRegistry):
    """Defect 2: on SQLite a 422/409 under key K kept K claimed forever."""
    version = registry.chunk(unique("idem"))["latest"]["id"]
    key = {"Idempotency-Key": unique("k")}
    bad = {"entries": [{"chunk_version_id": 2_000_000_000, "rho": 0.5}]}
    refused = registry.call("POST", "/v1/banks", json=bad, headers=key)
    assert refused.status_code == 422, refused.text
    good = {"entries": [{"chunk_version_id": version, "rho": 0.5}]}
    first = registry.call("POST", "/v1/banks", json=good, headers=key)
    assert first.status_code == 201, first.text
    again = registry.call("POST", "/v1/banks", json=good, headers=key)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content


def test_a_refused_write_leaves_no_rows(registry: LiveRegistry):
    """Defect 3: a request answered 4xx could still leave rows behind (SQLite savepoints)."""
    before = registry.ok("GET", "/v1/banks")["total"]
    version = registry.chunk(unique("left"))["latest"]["id"]
    # The bank row is flushed before the second entry is found missing.
    entries = [
        {"chunk_version_id": version, "rho": 0.5},
        {"chunk_version_id": 2_000_000_000, "rho": 0.5},
    ]
    assert registry.call("POST", "/v1/banks", json={"entries": entries}).status_code == 422
    assert registry.ok("GET", "/v1/banks")["total"] == before


def test_decision_racing_a_close_leaves_one_consistent_outcome(registry: LiveRegistry):
    """Defect 3: a decision that lost a race with a close answered 409 yet stayed stored."""
    world = gate_world(registry)
    for _ in range(6):
        run = open_gate(registry, world, n_tasks=1)
        observe(registry, run, world, n=1)
        decide = {
            "method": "POST",
            "url": f"/v1/gates/{run['id']}/decision",
            "json": decision_body(world),
            "headers": headers(Role.evaluator),
        }
        close = {
            "method": "PATCH",
            "url": f"/v1/gates/{run['id']}",
            "json": {"status": "failed"},
            "headers": headers(Role.evaluator),
        }
        decided, closed = concurrently(registry.url, [decide, close])
        assert sorted([decided.status_code, closed.status_code]) in ([200, 409], [201, 409])
        stored = registry.call("GET", f"/v1/gates/{run['id']}/decision")
        assert stored.status_code == (200 if decided.status_code == 201 else 404)
        if decided.status_code == 201:
            assert len(stored.json()["rows"]) == 1


# ---------------------------------------------------------------- gate helpers


def gate_world(registry: LiveRegistry) -> dict:
    version = registry.chunk(unique("gate"))["latest"]["id"]
    bank = registry.bank([version])
    checkpoint = unique("ckpt")
    registry.ok(
        "POST",
        "/v1/checkpoints",
        json={"id": checkpoint, "uri": f"file:///{checkpoint}", "step": 1, "round": 0},
    )
    return {"version": version, "bank": bank, "checkpoint": checkpoint}


def open_gate(registry: LiveRegistry, world: dict, *, n_tasks: int) -> dict:
    body = {
        "round": 0,
        "checkpoint_id": world["checkpoint"],
        "base_bank_id": world["bank"]["id"],
        "candidate_pool": {
            "columns": [{"chunk_version_id": world["version"], "kind": "current", "slot": 0}]
        },
        "mask_seed": 7,
        **gate_protocol(n_tasks),
    }
    return registry.ok("POST", "/v1/gates", role=Role.evaluator, json=body)


def observations(n: int, start: int = 0) -> list[dict]:
    rewards = {name: 0.5 for name in REWARD_COMPONENTS}
    return [
        {"task_id": f"t{i}", "inclusion": [i % 2], "bare": rewards, "masked": rewards}
        for i in range(start, start + n)
    ]


def observe(registry: LiveRegistry, run: dict, world: dict, *, n: int) -> None:
    registry.ok(
        "POST",
        f"/v1/gates/{run['id']}/observations",
        role=Role.evaluator,
        json={"observations": observations(n)},
    )


def decision_body(world: dict) -> dict:
    coefficients = {name: 0.0 for name in REWARD_COMPONENTS}
    row = {
        "chunk_version_id": world["version"],
        "coefficients": coefficients,
        "status": "retired",
    }
    return {"rows": [row]}


def test_concurrent_observation_batches_never_pass_the_task_count(registry: LiveRegistry):
    """Defect 7: 20 concurrent batches of 10 stored 202 observations for n_tasks = 100."""
    world = gate_world(registry)
    run = open_gate(registry, world, n_tasks=100)
    batches = [
        {
            "method": "POST",
            "url": f"/v1/gates/{run['id']}/observations",
            "json": {"observations": observations(10, start=10 * i)},
            "headers": headers(Role.evaluator),
        }
        for i in range(20)
    ]
    assert status_counts(concurrently(registry.url, batches)) == {201: 10, 409: 10}
    assert registry.ok("GET", f"/v1/gates/{run['id']}")["n_observations"] == 100


# ---------------------------------------------------------------- 5-10. hostile input


def test_a_lone_surrogate_is_a_422_not_a_500(registry: LiveRegistry):
    """Defect 5: "\\ud800" in a validated string crashed the 422 handler (500, reset)."""
    for body in (
        b'{"slug": "\\ud800", "content": {}}',
        b'{"slug": "ok", "content": {"title": "\\ud800", "applies_when": "x", "procedure": ["y"],'
        b' "verify": "z", "avoid": "w"}}',
    ):
        response = registry.call(
            "POST", "/v1/chunks", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, response.text
        assert response.json()["detail"]


def test_patch_a_draft_with_entries_replaces_them(registry: LiveRegistry):
    """Defect 6: `entries` is in BankUpdate, yet PATCH with it answered 500."""
    first, second = (registry.chunk(unique(f"p{i}"))["latest"]["id"] for i in range(2))
    draft = registry.bank([first], freeze=False)
    patched = registry.ok(
        "PATCH",
        f"/v1/banks/{draft['id']}",
        role=Role.evaluator,
        json={"entries": [{"chunk_version_id": second, "rho": 0.25}]},
    )
    assert [(e["chunk_version_id"], e["rho"]) for e in patched["entries"]] == [(second, 0.25)]
    assert registry.ok("GET", f"/v1/banks/{draft['id']}")["entries"] == patched["entries"]


def test_aliases_never_point_at_a_retired_bank(registry: LiveRegistry):
    """Defect 8: create and move both accepted a retired bank, a state retire itself refuses."""
    live, retired = two_frozen_banks(registry)
    registry.ok("POST", f"/v1/banks/{retired['id']}/retire")
    name = unique("al")
    create = registry.call(
        "POST", "/v1/aliases", json={"name": name, "bank_id": retired["id"], "reason": "r"}
    )
    assert create.status_code == 409, create.text
    alias = registry.ok(
        "POST", "/v1/aliases", json={"name": name, "bank_id": live["id"], "reason": "r"}
    )
    move = registry.call(
        "PUT",
        f"/v1/aliases/{name}",
        json={"bank_id": retired["id"], "reason": "r"},
        headers={"If-Match": alias["etag"]},
    )
    assert move.status_code == 409, move.text


def test_a_bank_cannot_become_its_own_ancestor(registry: LiveRegistry):
    """Defect 9: PATCH parent_bank_id made a cycle."""
    version = registry.chunk(unique("cyc"))["latest"]["id"]
    parent = registry.bank([version], freeze=False)
    child = registry.bank([version], freeze=False, parent_bank_id=parent["id"])
    grandchild = registry.bank([version], freeze=False, parent_bank_id=child["id"])
    for descendant in (child, grandchild):
        cycle = registry.call(
            "PATCH", f"/v1/banks/{parent['id']}", json={"parent_bank_id": descendant["id"]}
        )
        assert cycle.status_code == 422, cycle.text
    assert registry.ok("GET", f"/v1/banks/{parent['id']}")["parent_bank_id"] is None


def test_bodies_over_the_limit_are_413_and_not_stored(registry: LiveRegistry):
    """Defect 10: 10 MB in card.extras was stored (and copied into the audit log)."""
    before = registry.ok("GET", "/v1/cards")["total"]
    card = {
        "round": 0,
        "task_id": "t",
        "outcome": "NO_PROPOSAL",
        "eligible": False,
        "extras": {"blob": "x" * (2 << 20)},
    }
    assert registry.call("POST", "/v1/cards", json=card).status_code == 413

    def chunked():  # no Content-Length: the limit counts the bytes actually sent
        yield b'{"round": 0, "task_id": "t", "outcome": "NO_PROPOSAL", "eligible": false, '
        yield b'"extras": {"blob": "' + b"x" * (2 << 20) + b'"}}'

    response = registry.call(
        "POST", "/v1/cards", content=chunked(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert registry.ok("GET", "/v1/cards")["total"] == before


# ---------------------------------------------------------------- 11. append-only, for real


@pytest.fixture
def app_role_registry() -> Iterator[tuple[LiveRegistry, str]]:
    """A Postgres registry served as a role that owns nothing; yields it and the owner's URL."""
    with serve_as_app_role() as served:
        yield served


def test_the_app_role_cannot_undo_history_and_frozen_banks_hold(app_role_registry):
    """Defect 11: as the tables' owner the app could TRUNCATE, disable the triggers or turn
    them off; frozen banks' rows were not protected at all, and the API then served a changed
    rho under the old ETag and content hash."""
    registry, owner_url = app_role_registry
    bank = registry.bank([registry.chunk(unique("frozen"))["latest"]["id"]])
    for statement in (
        "TRUNCATE audit_log",
        "ALTER TABLE audit_log DISABLE TRIGGER ALL",
        "SET session_replication_role = replica",
        "DELETE FROM audit_log",
        f"UPDATE bank_entries SET rho = 0.99 WHERE bank_id = {bank['id']}",
        f"UPDATE banks SET q = 0.9 WHERE id = {bank['id']}",
    ):
        with (
            psycopg.connect(registry.database_url, autocommit=True) as app_connection,
            pytest.raises(psycopg.Error),
        ):
            app_connection.execute(statement)
    # Only a superuser can still switch the triggers off; the served hash then refuses it.
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute("SET session_replication_role = replica")
        owner.execute(f"UPDATE bank_entries SET rho = 0.99 WHERE bank_id = {bank['id']}")
    tampered = registry.call("GET", f"/v1/banks/{bank['id']}")
    assert tampered.status_code == 500 and "content hash" in tampered.json()["detail"]


def test_if_match_star_movers_all_succeed_in_turn(registry: LiveRegistry):
    """Defect 13: `If-Match: *` means "whatever it is now", yet 38 of 40 such movers got 412."""
    banks = two_frozen_banks(registry)
    name = unique("star")
    registry.ok(
        "POST", "/v1/aliases", json={"name": name, "bank_id": banks[0]["id"], "reason": "r"}
    )
    moves = [
        {
            "method": "PUT",
            "url": f"/v1/aliases/{name}",
            "json": {"bank_id": banks[(i + 1) % 2]["id"], "reason": f"mover {i}"},
            "headers": headers(Role.evaluator, **{"If-Match": "*"}),
        }
        for i in range(40)
    ]
    assert status_counts(concurrently(registry.url, moves)) == {200: 40}
    assert registry.ok("GET", f"/v1/aliases/{name}")["revision"] == 41


def test_the_same_text_for_two_new_chunks_at_once_is_not_a_conflict(registry: LiveRegistry):
    """Defect 13: unrelated writers of the same text to different chunks got 409."""
    content = chunk_content(unique("shared-text"))
    posts = [
        {
            "method": "POST",
            "url": "/v1/chunks",
            "json": {"slug": unique("twin"), "content": content},
            "headers": headers(Role.analyst),
        }
        for _ in range(20)
    ]
    responses = concurrently(registry.url, posts)
    assert status_counts(responses) == {201: 20}
    assert len({r.json()["latest"]["content_hash"] for r in responses}) == 1


@pytest.mark.parametrize(
    "entry",
    [
        {"chunk_version_id": 1, "rho": True},
        {"chunk_version_id": 1, "rho": "0.5"},
        {"chunk_version_id": "1", "rho": 0.5},
        {"chunk_version_id": 1.0, "rho": 0.5},
    ],
    ids=["bool-rho", "text-rho", "text-id", "float-id"],
)
def test_numbers_are_strict(registry: LiveRegistry, entry: dict):
    """Defect 13: `rho: true`, `"0.5"` and a round `"1"` were coerced and accepted."""
    response = registry.call("POST", "/v1/banks", json={"entries": [entry]})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:3] == ["body", "entries", 0]


@pytest.mark.parametrize(
    "extras",
    [b'{"bad": NaN}', b'{"bad": Infinity}', b'{"bad": "nul \\u0000"}', b'{"\\ud800": 1}'],
    ids=["nan", "infinity", "nul", "surrogate-key"],
)
def test_free_form_json_either_database_stores_is_the_only_kind_accepted(
    registry: LiveRegistry, extras: bytes
):
    """Defect 13: SQLite stored NUL, NaN and Infinity that Postgres refuses."""
    body = b'{"round": 0, "task_id": "t", "outcome": "NO_PROPOSAL", "eligible": false, "extras": '
    response = registry.call(
        "POST",
        "/v1/cards",
        content=body + extras + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:2] == ["body", "extras"]


def test_both_databases_answer_the_same_bytes(registry: LiveRegistry):
    """Defect 13: SQLite dropped the timezone and kept a key order Postgres changes.

    Run on each database, the answers must hold these exact bytes: keys in sorted order (the
    one order both can give) and times in UTC with a `Z`.
    """
    card = {
        "round": 0,
        "task_id": "t",
        "outcome": "NO_PROPOSAL",
        "eligible": False,
        "extras": {"zeta": 1, "alpha": {"b": 0.1, "a": [1, "x"]}, "mid": None},
    }
    with registry.client(Role.analyst) as http:
        created = http.post("/v1/cards", json=card)
        read = http.get(f"/v1/cards/{created.json()['id']}")
    assert created.status_code == 201 and read.status_code == 200
    for response in (created, read):
        assert b'"extras":{"alpha":{"a":[1,"x"],"b":0.1},"mid":null,"zeta":1}' in response.content
        assert re.search(rb'"created_at":"[0-9T:.-]+Z"', response.content), response.text


def test_a_stored_card_reads_back_as_it_was_answered(registry: LiveRegistry):
    """Issue 8: the card write answers from the request, not from a re-read of its rows.

    The answer, the card read back, and the audit entry's `after` (the deployable half only)
    must all be the same document; the privileged audit is served only by its own route.
    """
    privileged = {"minimal_repair": "add the budget", "earliest_divergence": "step 3"}
    card = {
        "round": 0,
        "task_id": unique("t"),
        "outcome": "ADD",
        "eligible": True,
        "privileged_audit": privileged,
        "deployable": {
            "failure_mechanism": "查询遗漏了预算约束",
            "applicable_when": "任务给出预算时",
            "observable_trigger": "首屏商品价格超出预算",
            "corrective_procedure": "把预算写进搜索词",
            "verification_step": "首屏价格均在预算内",
            "proposed_content": chunk_content("budget"),
        },
        "firewall_findings": [],
        "extras": {"b": [2, {"y": 1, "x": 0}], "a": 1},
    }
    with registry.client(Role.analyst) as http:
        created = http.post("/v1/cards", json=card)
        assert created.status_code == 201, created.text
        card_id = created.json()["id"]
        read = http.get(f"/v1/cards/{card_id}")
        entries = http.get("/v1/audit", params={"object_type": "card", "object_id": card_id})
        audit = http.get(f"/v1/cards/{card_id}/audit")
    assert created.headers["location"] == f"/v1/cards/{card_id}"
    assert read.content == created.content
    [entry] = entries.json()["items"]
    assert entry["action"] == "card.create" and entry["after"] == created.json()
    assert "privileged_audit" not in created.json() and "privileged_audit" not in entry["after"]
    assert audit.json()["card_id"] == card_id and audit.json()["privileged_audit"] == privileged


# ---------------------------------------------------------------- tokens


def test_expired_and_revoked_tokens_are_refused(registry: LiveRegistry):
    """Issue 8 (also): tokens expire and can be revoked without deleting their grant."""
    for token, reason in ((EXPIRED_TOKEN, "expired"), (REVOKED_TOKEN, "unknown")):
        response = registry.call(
            "GET", "/v1/banks", role=None, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 401 and reason in response.json()["detail"]
    assert registry.call("GET", "/v1/banks", role=Role.reader).status_code == 200


# ---------------------------------------------------------------- seed-demo and the docs


def docs_recipes() -> str:
    """The recipe block of docs/registry.md: the bash block that starts with `export R=`."""
    text = (REPO_ROOT / "docs" / "registry.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    return next(block for block in blocks if block.startswith("export R="))


def test_seed_demo_makes_every_docs_recipe_run_as_written(tmp_path):
    """Issue 12: the recipes named ids a fresh registry does not have."""
    with serve_registry(f"sqlite:///{tmp_path / 'demo.sqlite'}") as live:
        env = {**os.environ, "REGISTRY_TOKEN": TOKENS[Role.operator]}
        seeded = subprocess.run(
            [str(INTRASKILL), "registry", "seed-demo", "--registry", live.url],
            env=env,
            capture_output=True,
            text=True,
        )
        assert seeded.returncode == 0, seeded.stdout + seeded.stderr
        again = subprocess.run(
            [str(INTRASKILL), "registry", "seed-demo", "--registry", live.url],
            env=env,
            capture_output=True,
            text=True,
        )
        assert again.returncode == 1 and "fresh" in again.stdout
        # Every curl must succeed (2xx): the recipes run with -e and curl failing on errors.
        script = (
            "set -euo pipefail\n"
            'curl() { command curl --fail-with-body "$@"; }\n'
            + docs_recipes().replace("http://127.0.0.1:8000", live.url)
        )
        ran = subprocess.run(
            ["bash", "-c", script],
            env={**env, "TOKEN": TOKENS[Role.operator]},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        assert "idempotent-replayed: true" in ran.stdout.lower()
        assert '[\n  1,\n  "complete",\n  1\n]' in ran.stdout  # the Gate A run, decided


# ---------------------------------------------------------------- 12. database faults


@pytest.mark.slow
@pytest.mark.skipif(cluster_tools_missing() is not None, reason=str(cluster_tools_missing()))
def test_postgres_outage_answers_503_then_recovers_without_losing_a_write(tmp_path):
    """Defect 12: a stopped database gave 500s and dropped connections, never 503.

    A throwaway cluster is stopped and started again under write traffic: during the outage
    writes and /readyz answer 503 + Retry-After, the server recovers on its own, and every
    write it acknowledged (201) is there afterwards.
    """
    with (
        throwaway_cluster() as cluster,
        scratch_postgres_database(cluster.admin_url) as url,
        serve_registry(url, connect_timeout_s="2") as registry,
    ):
        traffic = WriteTraffic(registry)
        with traffic.running(writers=4):
            time.sleep(1.5)
            cluster.ctl("stop")
            time.sleep(2)
            down = registry.call("GET", "/readyz")
            assert down.status_code == 503 and down.headers["Retry-After"]
            time.sleep(1)
            cluster.ctl("start")
            wait_until_ready(registry, timeout_s=30)
            time.sleep(1.5)
        assert set(traffic.statuses) <= {201, 503}, traffic.statuses
        assert traffic.statuses[503] > 0 and traffic.statuses[201] > 0, traffic.statuses
        stored = all_chunk_slugs(registry)
        assert traffic.acknowledged <= stored, traffic.acknowledged - stored


def all_chunk_slugs(registry: LiveRegistry) -> set[str]:
    """Every chunk's slug, page by page (a fast registry writes more than a page in seconds)."""
    slugs: set[str] = set()
    offset: int | None = 0
    while offset is not None:
        page = registry.ok("GET", "/v1/chunks", params={"limit": 500, "offset": offset})
        slugs |= {chunk["slug"] for chunk in page["items"]}
        offset = page["next_offset"]
    return slugs


class WriteTraffic:
    """Writer threads that create chunks in a loop and remember which ones were acknowledged."""

    def __init__(self, registry: LiveRegistry) -> None:
        self.registry = registry
        self.acknowledged: set[str] = set()
        self.statuses: Counter[int | str] = Counter()
        self._stop = threading.Event()

    def _write(self, worker: int) -> None:
        with self.registry.client(Role.analyst, timeout=30) as http:
            for n in itertools.count():
                if self._stop.is_set():
                    return
                slug = f"w{worker}-{n}"
                try:
                    response = http.post(
                        "/v1/chunks", json={"slug": slug, "content": chunk_content(slug)}
                    )
                except httpx.TransportError as error:
                    self.statuses[type(error).__name__] += 1
                    continue
                self.statuses[response.status_code] += 1
                if response.status_code == 201:
                    self.acknowledged.add(slug)
                else:
                    time.sleep(0.05)

    @contextmanager
    def running(self, writers: int) -> Iterator[None]:
        threads = [threading.Thread(target=self._write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            self._stop.set()
            for thread in threads:
                thread.join(timeout=60)


def wait_until_ready(registry: LiveRegistry, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while registry.call("GET", "/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the registry did not recover"
        time.sleep(0.2)
