"""Issue 28: a third live probe of a real `intraskill registry serve` process, on Postgres and
on SQLite.

Each test pins one finding: a loop that stalled after its first admission (a settled candidate
re-settled by a later gate), gates sharing a candidate, bodies and query bounds that crashed the
server, an audit tail that skipped entries, look-alike names, invisible text, -0.0, doubled
Authorization headers, an operator's retire undone by an evaluator, readiness blind to
unwritable databases, and pages without a size cap.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import psycopg
import pytest
from live_server import LiveRegistry, concurrently, unique
from registry_support import ADMIN_URL, TOKENS, chunk_content, gate_protocol, headers

from shared.contracts.registry_api.schemas import REWARD_COMPONENTS, Role

# ---------------------------------------------------------------- the loop's records


def rewards(value: float) -> dict[str, float]:
    return {name: value for name in REWARD_COMPONENTS}


class Loop:
    """The records one round of the slow loop leaves, made through the API by the role that
    makes each in the product (docs/registry.md)."""

    def __init__(self, registry: LiveRegistry) -> None:
        self.registry = registry
        self.checkpoint = unique("ckpt")
        body = {"id": self.checkpoint, "uri": "file:///ckpt", "step": 20, "round": 0}
        registry.ok("POST", "/v1/checkpoints", role=Role.trainer, json=body)

    def candidate(self, round: int) -> dict:
        """An ADD candidate of `round`, backed by a card of its own."""
        tag = unique("cand")
        deployable = {
            "failure_mechanism": "the query dropped the budget",
            "applicable_when": "the task states a budget",
            "observable_trigger": "results above budget",
            "corrective_procedure": "add the budget to the query",
            "verification_step": "first page prices fit the budget",
        }
        card = self.registry.ok(
            "POST",
            "/v1/cards",
            role=Role.analyst,
            json={
                "round": round,
                "task_id": f"task-{tag}",
                "outcome": "ADD",
                "eligible": True,
                "privileged_audit": {"earliest_divergence": "step 2"},
                "deployable": deployable,
            },
        )
        body = {
            "round": round,
            "operation": "ADD",
            "slug": tag,
            "content": chunk_content(tag),
            "source_card_ids": [card["id"]],
        }
        return self.registry.ok("POST", "/v1/candidates", role=Role.analyst, json=body)

    def gate(self, round: int, base_bank_id: int, columns: list[tuple[int, str]]):
        """POST an online gate over `columns` ((version id, kind), one slot each)."""
        pool = [
            {"chunk_version_id": vid, "kind": kind, "slot": slot}
            for slot, (vid, kind) in enumerate(columns)
        ]
        body = {
            "round": round,
            "checkpoint_id": self.checkpoint,
            "base_bank_id": base_bank_id,
            "candidate_pool": {"columns": pool},
            "mask_seed": 7,
            **gate_protocol(1),
        }
        return self.registry.call("POST", "/v1/gates", role=Role.evaluator, json=body)

    def observe(self, gate: dict) -> None:
        width = len(gate["candidate_pool"]["columns"])
        observation = {
            "task_id": "val-0",
            "inclusion": [1] * width,
            "bare": rewards(0),
            "masked": rewards(1),
        }
        self.registry.ok(
            "POST",
            f"/v1/gates/{gate['id']}/observations",
            role=Role.evaluator,
            json={"observations": [observation]},
        )

    def decide(self, gate: dict, statuses: dict[int, str]):
        """POST a final decision: version id -> status (selected ones ranked in that order)."""
        rows = []
        for rank, (vid, status) in enumerate(statuses.items(), 1):
            selected = status == "selected"
            rows.append(
                {
                    "chunk_version_id": vid,
                    "status": status,
                    "rank": rank if selected else None,
                    "coefficients": {"r_strict": 0.2 if selected else -0.1},
                }
            )
        return self.registry.call(
            "POST", f"/v1/gates/{gate['id']}/decision", role=Role.evaluator, json={"rows": rows}
        )

    def bank(self, version_ids: list[int], decision_id: int) -> dict:
        return self.registry.bank(version_ids, gate_decision_id=decision_id)

    def candidate_now(self, candidate: dict) -> dict:
        return self.registry.ok("GET", f"/v1/candidates/{candidate['id']}")


# ---------------------------------------------------------------- 1. three rounds


def test_three_rounds_with_an_admission_in_the_first(registry: LiveRegistry):
    """Item 1 (High): X, admitted in round 1, is a `current` column in round 2 (kept) and in
    round 3 (retired). Each final decision must be stored (201: a bank may cite it) and must
    leave X as round 1 settled it: selected by decision 1. Before the fix Postgres answered
    409 to round 2's decision and SQLite rewrote X's settlement."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])

    # Round 1: X is proposed and admitted.
    x = loop.candidate(1)
    gate = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")])
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    first = loop.decide(gate.json(), {anchor: "selected", x["chunk_version_id"]: "selected"})
    assert first.status_code == 201, first.text
    d1 = first.json()["id"]
    assert loop.candidate_now(x)["status"] == "selected"
    bank1 = loop.bank([anchor, x["chunk_version_id"]], d1)

    # Round 2: X is current and kept; Y, proposed this round, is not admitted.
    y = loop.candidate(2)
    columns = [
        (anchor, "current"),
        (x["chunk_version_id"], "current"),
        (y["chunk_version_id"], "add"),
    ]
    gate = loop.gate(2, bank1["id"], columns)
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    second = loop.decide(
        gate.json(),
        {
            anchor: "selected",
            x["chunk_version_id"]: "selected",
            y["chunk_version_id"]: "non_positive",
        },
    )
    assert second.status_code == 201, second.text
    d2 = second.json()["id"]
    assert registry.ok("GET", f"/v1/gates/{gate.json()['id']}")["status"] == "complete"
    assert (loop.candidate_now(x)["status"], loop.candidate_now(x)["decision_id"]) == (
        "selected",
        d1,
    )
    assert (loop.candidate_now(y)["status"], loop.candidate_now(y)["decision_id"]) == (
        "rejected",
        d2,
    )
    bank2 = loop.bank([anchor, x["chunk_version_id"]], d2)  # a bank may cite round 2's decision

    # Round 3: X is current and retired; Z, proposed this round, is admitted.
    z = loop.candidate(3)
    columns = [
        (anchor, "current"),
        (x["chunk_version_id"], "current"),
        (z["chunk_version_id"], "add"),
    ]
    gate = loop.gate(3, bank2["id"], columns)
    assert gate.status_code == 201, gate.text
    loop.observe(gate.json())
    third = loop.decide(
        gate.json(),
        {anchor: "selected", z["chunk_version_id"]: "selected", x["chunk_version_id"]: "retired"},
    )
    assert third.status_code == 201, third.text
    d3 = third.json()["id"]
    assert (loop.candidate_now(x)["status"], loop.candidate_now(x)["decision_id"]) == (
        "selected",
        d1,
    )
    assert (loop.candidate_now(z)["status"], loop.candidate_now(z)["decision_id"]) == (
        "selected",
        d3,
    )
    loop.bank([anchor, z["chunk_version_id"]], d3)


# ---------------------------------------------------------------- 2. gates sharing a candidate


def test_a_gate_over_a_settled_candidate_is_refused(registry: LiveRegistry):
    """Item 2: creating a gate did not check that its candidates were still proposed."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])
    x = loop.candidate(1)
    gate = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")]).json()
    loop.observe(gate)
    decided = loop.decide(gate, {anchor: "selected", x["chunk_version_id"]: "non_positive"})
    assert decided.status_code == 201, decided.text
    again = loop.gate(1, base["id"], [(anchor, "current"), (x["chunk_version_id"], "add")])
    assert again.status_code == 422, again.text
    assert f"candidate {x['id']}" in again.text and "rejected" in again.text
    assert again.json()["detail"][0]["loc"] == [
        "body",
        "candidate_pool",
        "columns",
        1,
        "chunk_version_id",
    ]


def test_two_open_gates_sharing_a_candidate_settle_it_once(registry: LiveRegistry):
    """Item 2: two open gates of one round shared candidate X; both final decisions were
    stored and X ended rejected by the second after being selected by the first."""
    loop = Loop(registry)
    anchor = registry.chunk(unique("anchor"))["latest"]["id"]
    base = registry.bank([anchor])
    x = loop.candidate(1)
    columns = [(anchor, "current"), (x["chunk_version_id"], "add")]
    gates = [loop.gate(1, base["id"], columns).json() for _ in range(2)]
    for gate in gates:
        loop.observe(gate)
    first = loop.decide(gates[0], {anchor: "selected", x["chunk_version_id"]: "selected"})
    assert first.status_code == 201, first.text
    second = loop.decide(gates[1], {anchor: "selected", x["chunk_version_id"]: "non_positive"})
    assert second.status_code == 409, second.text
    assert f"candidate {x['id']}" in second.text
    assert loop.candidate_now(x)["status"] == "selected"
    assert loop.candidate_now(x)["decision_id"] == first.json()["id"]
    assert registry.ok("GET", f"/v1/gates/{gates[1]['id']}")["status"] == "open"
    # What is left to it: a provisional close, which settles nothing.
    provisional = registry.call(
        "POST",
        f"/v1/gates/{gates[1]['id']}/decision",
        role=Role.evaluator,
        json={
            "provisional": True,
            "rows": [
                {"chunk_version_id": anchor, "status": "selected", "rank": 1,
                 "coefficients": {"r_strict": 0.2}},
                {"chunk_version_id": x["chunk_version_id"], "status": "non_positive",
                 "coefficients": {"r_strict": -0.1}},
            ],
        },
    )  # fmt: skip
    assert provisional.status_code == 201, provisional.text
    assert loop.candidate_now(x)["decision_id"] == first.json()["id"]


# ---------------------------------------------------------------- 3. encodings


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-32-be"])
def test_a_json_body_in_another_encoding_than_utf8_is_refused(registry: LiveRegistry, encoding):
    """Item 3: the nesting check scanned bytes as UTF-8 while the parser read UTF-16/32, so a
    UTF-16 body nested 500 deep reached the parser and the server answered 500."""
    deep = "[" * 500 + "]" * 500
    for path in ("/v1/cards", "/v1/chunks"):
        for text in (deep, f'{{"round": 0, "x": {deep}}}', '{"round": 0}'):
            response = registry.call(
                "POST",
                path,
                role=Role.analyst,
                content=text.encode(encoding),
                headers={"Content-Type": "application/json"},
            )
            assert response.status_code == 415, (path, response.status_code, response.text)
    utf8 = registry.call("POST", "/v1/cards", role=Role.analyst, content=deep.encode())
    assert utf8.status_code == 422, utf8.text


# ---------------------------------------------------------------- 4. time bounds


@pytest.mark.parametrize(
    "query", ["since=0001-01-01T00:00:00%2B00:01", "until=9999-12-31T23:59:59-00:01"]
)
def test_audit_time_bounds_out_of_range_are_422(registry: LiveRegistry, query: str):
    """Item 4: a bound valid as written but outside datetime's range in UTC answered 500."""
    response = registry.call("GET", f"/v1/audit?{query}", role=Role.reader)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][0] == "query"


# ---------------------------------------------------------------- 5. audit tail


def test_tailing_the_audit_log_by_next_offset_misses_nothing(registry: LiveRegistry):
    """Item 5: a client tailing by `next_offset` missed 5 of 1,052 entries on Postgres with 8
    writers: ids were drawn before commit, so a late commit landed behind the cursor."""
    writers, per_writer = 8, 40
    start = registry.ok("GET", "/v1/audit?limit=1", role=Role.reader)["total"]
    done = threading.Event()

    def write(index: int) -> None:
        with registry.client(Role.analyst) as http:
            for n in range(per_writer):
                slug = unique(f"tail{index}-{n}")
                body = {"slug": slug, "content": chunk_content("tail")}
                response = http.post("/v1/chunks", json=body)
                assert response.status_code == 201, response.text

    seen: list[int] = []

    def tail() -> None:
        offset = start
        with registry.client(Role.reader) as http:
            while True:
                finished = done.is_set()  # read before the page: a last pass after the writers
                got = http.get(f"/v1/audit?offset={offset}&limit=500").json()
                seen.extend(item["id"] for item in got["items"])
                offset += len(got["items"])
                if finished and not got["items"]:
                    return

    tailer = threading.Thread(target=tail)
    tailer.start()
    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    tailer.join()
    stored = []
    offset = start
    while offset is not None:
        got = registry.ok("GET", f"/v1/audit?offset={offset}&limit=500", role=Role.reader)
        stored += [item["id"] for item in got["items"]]
        offset = got["next_offset"]
    assert len(stored) == writers * per_writer * 2  # chunk.create + chunk_version.create
    assert sorted(set(stored) - set(seen)) == []
    assert seen == sorted(seen)  # the tail reads in id order, which is commit order


# ---------------------------------------------------------------- 6. look-alikes


@pytest.mark.parametrize(
    "name", ["product1on", "pr0duct1on", "productlon", "procluction", "pr0ductl0n", "PRODUCTI0N"]
)
def test_more_look_alikes_of_the_protected_alias_are_protected(registry: LiveRegistry, name):
    """Item 6: the fold mapped 1 to l but never i, and knew neither cl (d) nor l for i."""
    bank = registry.bank([registry.chunk(unique("la"))["latest"]["id"]])
    body = {"name": name.lower(), "bank_id": bank["id"], "reason": "look-alike"}
    refused = registry.call("POST", "/v1/aliases", role=Role.evaluator, json=body)
    assert refused.status_code == 403, refused.text


# ---------------------------------------------------------------- 7. invisible characters

INVISIBLE = ["\u202e", "\u2067", "\u200b", "\u200f", "\u061c", "\u3164", "\u115f", "\u2800",
             "\u034f", "\ufe0f"]  # fmt: skip


@pytest.mark.parametrize("invisible", INVISIBLE)
def test_invisible_characters_are_refused_in_every_text_field(registry: LiveRegistry, invisible):
    """Item 7: invisible characters were refused in titles only (and only category Cf): they
    were stored in `procedure` and rendered into the skill block."""
    slug = unique("inv")
    chunk_fields = {
        "title": f"Check{invisible} the price",
        "procedure": [f"open the item page{invisible}"],
        "applies_when": f"a budget{invisible} is stated",
        "verify": f"{invisible}the price fits",
        "avoid": f"buying{invisible} early",
    }
    for field, value in chunk_fields.items():
        content = chunk_content(slug, **{field: value})
        response = registry.call(
            "POST", "/v1/chunks", role=Role.analyst, json={"slug": slug, "content": content}
        )
        assert response.status_code == 422, (field, response.text)
    bank = registry.bank([registry.chunk(unique("inv"))["latest"]["id"]], freeze=False)
    noted = registry.call("PATCH", f"/v1/banks/{bank['id']}", json={"note": f"a{invisible}b"})
    assert noted.status_code == 422, noted.text


def test_visible_text_of_other_scripts_still_passes(registry: LiveRegistry):
    """The rule is not over-eager: combining marks, ideographic spaces and line breaks."""
    slug = unique("scripts")
    content = chunk_content(
        slug, title="हिन्दी: कीमत जाँचें", procedure=["比较价格\u3000与预算", "line\nbreak"]
    )
    registry.ok("POST", "/v1/chunks", role=Role.analyst, json={"slug": slug, "content": content})


# ---------------------------------------------------------------- 8. negative zero


def test_negative_zero_is_stored_as_zero(registry: LiveRegistry):
    """Item 8: Postgres kept rho -0.0 and SQLite 0.0 (different bank hashes); `extras` -0.0
    came back as 0.0 on Postgres only."""
    version = registry.chunk(unique("zero"))["latest"]["id"]
    hashes = []
    for zero in ("0.0", "-0.0"):
        entry = f'{{"chunk_version_id": {version}, "rho": {zero}, "coefficient": {zero}}}'
        body = f'{{"entries": [{entry}]}}'
        bank = registry.ok("POST", "/v1/banks", content=body.encode(),
                           headers={"Content-Type": "application/json"})  # fmt: skip
        frozen = registry.ok("POST", f"/v1/banks/{bank['id']}/freeze")
        hashes.append(frozen["content_hash"])
        text = registry.call("GET", f"/v1/banks/{bank['id']}").text
        assert "-0.0" not in text
        entry = registry.ok("GET", f"/v1/banks/{bank['id']}")["entries"][0]
        assert math.copysign(1, entry["rho"]) == 1 and math.copysign(1, entry["coefficient"]) == 1
    assert hashes[0] == hashes[1]
    card = (
        '{"round": 0, "task_id": "t-zero", "outcome": "NO_PROPOSAL", "eligible": false, '
        '"privileged_audit": {}, "extras": {"x": -0.0, "y": [-0.0]}}'
    )
    created = registry.ok("POST", "/v1/cards", role=Role.analyst, content=card.encode(),
                          headers={"Content-Type": "application/json"})  # fmt: skip
    read = registry.call("GET", f"/v1/cards/{created['id']}")
    assert "-0.0" not in read.text and '"x":0.0' in read.text.replace(" ", "")


# ---------------------------------------------------------------- 9. Authorization


def test_two_authorization_headers_are_400(registry: LiveRegistry):
    """Item 9: the frozen-bank cache answered from the last header and routes from the first."""
    bank = registry.bank([registry.chunk(unique("auth"))["latest"]["id"]])
    registry.ok("GET", f"/v1/banks/{bank['id']}")  # cached: the fast path answers next
    two = [("Authorization", f"Bearer {TOKENS[Role.reader]}"),
           ("Authorization", f"Bearer {TOKENS[Role.operator]}")]  # fmt: skip
    with httpx.Client(base_url=registry.url, timeout=60) as http:
        for method, path in (("GET", f"/v1/banks/{bank['id']}"), ("GET", "/v1/whoami"),
                             ("POST", f"/v1/banks/{bank['id']}/retire")):  # fmt: skip
            response = http.request(method, path, headers=two)
            assert response.status_code == 400, (path, response.status_code, response.text)
    assert registry.ok("GET", f"/v1/banks/{bank['id']}/summary")["status"] == "frozen"


@pytest.mark.parametrize("wrapper", ["\xa0", "\x85"])
def test_a_token_wrapped_in_unicode_spaces_is_refused(registry: LiveRegistry, wrapper: str):
    """Item 9: `str.strip` took U+00A0 and U+0085 off a token, which then authenticated."""
    token = f"{wrapper}{TOKENS[Role.operator]}{wrapper}"
    with httpx.Client(base_url=registry.url, timeout=60) as http:
        response = http.get(
            "/v1/whoami", headers={"Authorization": f"Bearer {token}".encode("latin-1")}
        )
    assert response.status_code == 401, response.text


# ---------------------------------------------------------------- 10. scoped retire


def test_an_evaluator_cannot_undo_an_operators_retire(registry: LiveRegistry):
    """Item 10: retiring a chunk is operator-only, yet an evaluator could PATCH the operator's
    draft to put the chunk back and freeze it, or copy the draft and PATCH the copy."""
    keep, retired = (registry.chunk(unique("keep")), registry.chunk(unique("bad")))
    bank = registry.bank([keep["latest"]["id"], retired["latest"]["id"]])
    draft = registry.ok(
        "POST",
        f"/v1/banks/{bank['id']}/retire-chunk",
        json={"chunk_id": retired["id"], "reason": "misleads on bundles"},
    )
    entries = [{"chunk_version_id": v["latest"]["id"], "rho": 0.5} for v in (keep, retired)]
    patched = registry.call(
        "PATCH", f"/v1/banks/{draft['id']}", role=Role.evaluator, json={"entries": entries}
    )
    assert patched.status_code == 403, patched.text
    copied = registry.call(
        "POST", "/v1/banks", role=Role.evaluator, json={"from_bank_id": draft["id"]}
    )
    assert copied.status_code == 403, copied.text
    assert len(registry.ok("GET", f"/v1/banks/{draft['id']}")["entries"]) == 1
    # The operator's own edits go through; once frozen, the bank is everyone's to build on.
    registry.ok("PATCH", f"/v1/banks/{draft['id']}", json={"note": "checked"})
    registry.ok("POST", f"/v1/banks/{draft['id']}/freeze", role=Role.evaluator)
    registry.ok("POST", "/v1/banks", role=Role.evaluator, json={"from_bank_id": draft["id"]})


# ---------------------------------------------------------------- 11. readiness and page size


def test_a_page_stops_at_its_byte_cap(registry: LiveRegistry):
    """Item 11: a 50 MB page of cards was served with no size cap."""
    task = unique("big")
    filler = "x" * 900_000
    for _ in range(6):
        body = {"round": 0, "task_id": task, "outcome": "NO_PROPOSAL", "eligible": False,
                "privileged_audit": {}, "extras": {"filler": filler}}  # fmt: skip
        registry.ok("POST", "/v1/cards", role=Role.analyst, json=body)
    first = registry.call("GET", f"/v1/cards?task_id={task}&limit=50", role=Role.reader)
    assert first.status_code == 200
    assert len(first.content) <= (4 << 20) + 1_000_000  # the cap plus at most one item
    page = first.json()
    assert 1 <= len(page["items"]) < 6 and page["next_offset"] == len(page["items"])
    rest = registry.ok("GET", f"/v1/cards?task_id={task}&offset={page['next_offset']}",
                       role=Role.reader)  # fmt: skip
    assert len(page["items"]) + len(rest["items"]) == 6


def test_readyz_reports_a_database_that_takes_no_writes(registry: LiveRegistry, tmp_path):
    """Item 11: /readyz ran `SELECT 1` and stayed 200 while every write failed."""
    assert registry.call("GET", "/readyz", role=None).status_code == 200
    with read_only(registry.database_url):
        refused = registry.call("GET", "/readyz", role=None)
        assert refused.status_code == 503, refused.text
        assert "retry-after" in refused.headers
    assert registry.call("GET", "/readyz", role=None).status_code == 200


@contextmanager
def read_only(database_url: str) -> Iterator[None]:
    """The database made read-only: the SQLite file immutable (chattr +i), or the Postgres
    database defaulting to read-only transactions (new connections: the probe opens one)."""
    if database_url.startswith("sqlite"):
        if shutil.which("chattr") is None or os.geteuid() != 0:
            pytest.skip("making the SQLite file immutable needs chattr as root")
        path = database_url.split("///", 1)[1]
        subprocess.run(["chattr", "+i", path], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", path], check=True)
        return
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


# ---------------------------------------------------------------- the write path


def test_concurrent_card_posts_commit_together_and_fail_alone(registry: LiveRegistry):
    """Card POSTs share a transaction when they arrive together (group commit); one that
    fails a check inside the write (an unknown checkpoint) must fail alone: the others are
    stored and answered 201, each with its own card."""
    task = unique("group")
    bodies = [
        {"round": 0, "task_id": task, "outcome": "NO_PROPOSAL", "eligible": False,
         "privileged_audit": {}, "extras": {"n": n}}
        for n in range(20)
    ]  # fmt: skip
    bodies[7]["checkpoint_id"] = unique("no-such-checkpoint")
    requests = [
        {"method": "POST", "url": "/v1/cards", "json": body, "headers": headers(Role.analyst)}
        for body in bodies
    ]
    answers = concurrently(registry.url, requests)
    statuses = [answer.status_code for answer in answers]
    assert statuses[7] == 422, answers[7].text
    assert statuses[:7] + statuses[8:] == [201] * 19
    stored = registry.ok("GET", f"/v1/cards?task_id={task}&limit=50")
    assert stored["total"] == 19
    by_id = {card["id"]: card["extras"]["n"] for card in stored["items"]}
    for n, answer in enumerate(answers):
        if n != 7:
            assert by_id[answer.json()["id"]] == n
    for card_id in by_id:  # each stored card has its one audit entry
        entries = registry.ok("GET", f"/v1/audit?object_type=card&object_id={card_id}")
        assert [e["action"] for e in entries["items"]] == ["card.create"]
