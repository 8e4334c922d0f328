"""The console's security and error behaviour over HTTP, against real registry and console
processes: cookie flags, CSRF, login checks, readable errors, the audit filters.

Expected behaviour comes from the issue: HttpOnly + SameSite=Strict cookie, Secure over TLS,
a CSRF token on every writing form, registry errors as readable messages (never a trace).
"""

from __future__ import annotations

import html
import re

import httpx
import pytest

from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    CardCreate,
    CardOutcome,
    EvidenceCreate,
    RetryOutcome,
    Treatment,
    TreatmentMode,
)
from tests.console.live_console import live_world
from tests.live_servers import free_port, live_server


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with live_world(tmp_path_factory.mktemp("console-http")) as live:
        yield live


def nonce_of(client: httpx.Client) -> str:
    page = client.get("/login")
    return re.search(r'name="nonce" value="([^"]+)"', page.text).group(1)


def logged_in(world, role: str, **headers: str) -> httpx.Client:
    client = httpx.Client(base_url=world.console_url, headers=headers)
    answer = client.post("/login", data={"token": world.tokens[role], "nonce": nonce_of(client)})
    assert answer.status_code == 303 and answer.headers["location"] == "/banks"
    return client


def csrf_of(client: httpx.Client, path: str = "/banks") -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get(path).text).group(1)


def session_cookie_header(answer: httpx.Response) -> str:
    return next(
        v for v in answer.headers.get_list("set-cookie") if v.startswith("console_session=")
    )


def test_session_cookie_is_httponly_strict_and_secure_only_over_tls(world):
    # Behind a TLS-terminating proxy on loopback (X-Forwarded-Proto: https) the cookies are
    # Secure; a client jar would then withhold them over plain http, so they are sent by hand.
    for headers, secure in (({}, False), ({"X-Forwarded-Proto": "https"}, True)):
        form = httpx.get(f"{world.console_url}/login", headers=headers)
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text).group(1)
        answer = httpx.post(
            f"{world.console_url}/login",
            data={"token": world.tokens["reader"], "nonce": nonce},
            headers={**headers, "Cookie": f"console_login={nonce}"},
        )
        assert answer.status_code == 303
        for cookie in (session_cookie_header(answer), form.headers["set-cookie"]):
            cookie = cookie.lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            assert ("; secure" in cookie) is secure


def test_a_write_without_the_csrf_token_is_refused_and_changes_nothing(world):
    client = logged_in(world, "operator")
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        before = registry.get_alias("production")
    form = {"bank_id": str(world.seeded.bank_ids[0]), "reason": "no token", "if_match": before.etag}
    for csrf in (None, "not-the-token"):
        answer = client.post(
            "/aliases/production/move", data={**form, **({"csrf": csrf} if csrf else {})}
        )
        assert answer.status_code == 403 and "Form refused" in answer.text
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        assert registry.get_alias("production").revision == before.revision


def test_login_refuses_an_unknown_token_a_missing_nonce_and_foreign_redirects(world):
    client = httpx.Client(base_url=world.console_url)
    answer = client.post("/login", data={"token": "not-a-token", "nonce": nonce_of(client)})
    assert answer.status_code == 401 and "does not accept this token" in answer.text
    assert "console_session" not in answer.headers.get("set-cookie", "")
    fresh = httpx.Client(base_url=world.console_url)  # no nonce cookie: a cross-site post
    answer = fresh.post("/login", data={"token": world.tokens["reader"], "nonce": "x"})
    assert answer.status_code == 403
    answer = client.post(
        "/login",
        data={
            "token": world.tokens["reader"],
            "nonce": nonce_of(client),
            "next": "//evil.example/x",
        },
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/banks"


def test_pages_need_a_login_and_send_the_security_headers(world):
    answer = httpx.get(f"{world.console_url}/banks")
    assert answer.status_code == 303 and answer.headers["location"] == "/login?next=/banks"
    page = logged_in(world, "reader").get("/banks")
    assert "script-src" not in page.headers["content-security-policy"]  # no script at all
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_registry_errors_read_as_sentences_never_a_trace(world):
    client = logged_in(world, "operator")
    missing = client.get("/banks/999999")
    assert missing.status_code == 404 and "no such object" in missing.text
    # `current` and `production` point at the seed's second bank: the registry refuses to
    # retire a bank an alias points at (409).
    refused = client.post(
        f"/banks/{world.seeded.bank_ids[1]}/retire", data={"csrf": csrf_of(client)}
    )
    assert refused.status_code == 409 and "Not possible in its current state" in refused.text
    empty_reason = client.post(
        "/aliases/current/rollback", data={"csrf": csrf_of(client), "reason": ""}
    )
    assert empty_reason.status_code == 422 and "reason" in empty_reason.text
    not_a_number = client.post(
        "/aliases/current/move",
        data={"csrf": csrf_of(client), "bank_id": "two", "reason": "r", "if_match": '"r1"'},
    )
    assert not_a_number.status_code == 422 and "bank_id" in not_a_number.text
    for answer in (missing, refused, empty_reason, not_a_number):
        assert "Traceback" not in answer.text and 'id="problem"' in answer.text


def test_a_registry_that_does_not_answer_is_a_503_page(tmp_path):
    env = {
        "CONSOLE_REGISTRY_URL": f"http://127.0.0.1:{free_port()}",
        "CONSOLE_REGISTRY_TIMEOUT_S": "1",
    }
    with live_server(["console", "serve"], env, tmp_path / "console.log") as url:
        client = httpx.Client(base_url=url, timeout=60)
        answer = client.post("/login", data={"token": "whatever", "nonce": nonce_of(client)})
    assert answer.status_code == 503 and "The registry is not answering" in answer.text
    assert "Traceback" not in answer.text


def test_audit_log_filters_by_actor_action_and_time(world):
    client = logged_in(world, "reader")
    page = client.get("/audit", params={"action": "bank.freeze"})
    rows = re.findall(r"<td>bank.freeze</td>", page.text)
    assert len(rows) == len(world.seeded.bank_ids)  # the seed froze each of its banks once
    assert client.get("/audit", params={"since": "2999-01-01"}).text.count("No entry matches") == 1
    assert "No entry matches" in client.get("/audit", params={"actor": "nobody"}).text
    assert "No entry matches" not in client.get("/audit", params={"until": "2999-01-01T00:00"}).text
    assert client.get("/audit", params={"since": "yesterday"}).status_code == 422


def test_episode_replay_reads_traces_only_under_its_folder(world):
    client = logged_in(world, "reader")
    page = client.get(f"/cards/{world.review.eligible_card}/episode")
    assert page.status_code == 200 and "search[wireless headphones under 80 dollars]" in page.text
    with RegistryClient(world.registry_url, world.tokens["operator"]) as registry:
        group = registry.record_all_wrong_group(
            EvidenceCreate(
                task_id="val-0099", round=2, step=4, group_index=0, bank_id=2,
                checkpoint_id="demo-r2", treatment=Treatment(mode=TreatmentMode.skill_free,
                                                             inclusion=[0] * 5),
            )
        )  # fmt: skip
        registry.settle_retry(group.id, RetryOutcome.failure, trace_uri="file:///etc/passwd")
        card = registry.create_card(
            CardCreate(round=2, task_id="val-0099", outcome=CardOutcome.NO_PROPOSAL,
                       eligible=False, evidence_id=group.id)
        )  # fmt: skip
    outside = client.get(f"/cards/{card.id}/episode")
    assert outside.status_code == 404 and "is not under the console" in outside.text
    assert "root:" not in outside.text


def test_write_controls_are_drawn_for_operators_only(world):
    final = world.seeded.bank_ids[-1]
    for role, drawn in (("reader", False), ("evaluator", False), ("operator", True)):
        client = logged_in(world, role)
        pages = client.get(f"/banks/{final}").text + client.get("/banks").text
        assert ('action="/aliases/' in pages) is drawn, role
        assert (f'action="/banks/{final}/retire"' in pages) is drawn, role


def test_findings_name_the_gold_for_operators_and_stay_withheld_from_readers(world):
    """The registry withholds what the firewall matched from every card list; the console shows
    it to the roles that may read a card's privileged audit, on the queue and on the card."""
    gold = "Studio Pro Wireless Headphones"  # the blocked card's finding in live_console's world
    operator, reader = logged_in(world, "operator"), logged_in(world, "reader")
    for path in ("/review", f"/cards/{world.review.blocked_card}"):
        assert gold in operator.get(path).text, path
        assert gold not in reader.get(path).text, path


def test_a_card_page_and_the_review_queue_show_the_paired_verification(world):
    """Both counts of the paired check (with and without the repair, of k), its seeds and its
    verdict, as the registry stores them on the card (live_console's eligible card: 1 of 1
    with, 0 of 1 without, seed 11)."""
    reader = logged_in(world, "reader")
    page = reader.get(f"/cards/{world.review.eligible_card}").text
    shown = re.search(r'<p class="facts" id="verification">(.*?)</p>', page, re.S).group(1)
    assert "with the repair: <strong>1 of 1</strong>" in shown
    assert "without it: <strong>0 of 1</strong>" in shown
    assert "verified: yes" in shown and ">11</span>" in shown
    assert "1 of 1 with the repair, 0 of 1 without" in reader.get("/review").text


def test_bad_path_and_query_parameters_are_pages_not_json(world):
    client = logged_in(world, "reader")
    for path in ("/banks/abc", "/chunks?offset=-1", "/gates/1.5"):
        answer = client.get(path)
        assert answer.status_code == 422, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert 'id="problem"' in answer.text and "Traceback" not in answer.text, path


def test_every_alias_change_needs_if_match_and_changes_nothing_without_it(world):
    client = logged_in(world, "operator")
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        before = registry.get_alias("production")
    target = next(b for b in world.seeded.bank_ids if b != before.bank_id)
    for route in ("move", "rollback"):
        answer = client.post(
            f"/aliases/production/{route}",
            data={"csrf": csrf_of(client), "bank_id": str(target), "reason": "no precondition"},
        )
        assert answer.status_code == 422 and "if_match: required" in answer.text, route
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        assert registry.get_alias("production").revision == before.revision


def test_a_form_sent_after_the_login_expired_comes_back_with_its_reason(world):
    final = world.seeded.bank_ids[-1]
    stale = httpx.Client(base_url=world.console_url)  # its session is gone (no cookie)
    answer = stale.post(
        "/aliases/production/move",
        data={"csrf": "old", "bank_id": str(final), "reason": "typed, then lunch", "if_match": "x"},
    )
    assert answer.status_code == 303
    login = stale.get(answer.headers["location"])
    assert login.status_code == 200 and 'id="login-expired"' in login.text
    next_path = html.unescape(re.search(r'name="next" value="([^"]+)"', login.text).group(1))
    nonce = re.search(r'name="nonce" value="([^"]+)"', login.text).group(1)
    done = stale.post(
        "/login", data={"token": world.tokens["operator"], "nonce": nonce, "next": next_path}
    )
    assert done.status_code == 303
    page = stale.get(done.headers["location"])
    assert page.status_code == 200
    field = re.search(r'<input[^>]*id="reason-production"[^>]*>', page.text).group(0)
    assert 'value="typed, then lunch"' in field
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        assert registry.alias_history("production")[-1].reason != "typed, then lunch"


def test_the_console_serves_prometheus_metrics_without_ids_or_tokens(world):
    client = logged_in(world, "reader")
    client.get("/banks")
    text = httpx.get(f"{world.console_url}/metrics").text
    assert 'http_requests_total{method="GET",route="/banks",service="console",status="200"}' in text
    assert "console_sessions " in text
    assert world.tokens["reader"] not in text


def test_times_say_utc_and_the_audit_log_links_its_objects_and_says_what_changed(world):
    client = logged_in(world, "reader")
    page = client.get("/audit", params={"object_type": "alias", "object_id": "production"}).text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
    assert 'href="/banks#history-production"' in page
    # The seed moved production from S0 to its second bank: the row says so without the JSON.
    s0, second, _ = world.seeded.bank_ids
    assert re.search(
        rf'<span class="key">bank_id</span> <a href="/banks/{s0}">{s0}</a> → '
        rf'<a href="/banks/{second}">{second}</a>',
        page,
    )
    banks = client.get("/audit", params={"object_type": "bank"}).text
    assert f'href="/banks/{s0}"' in banks


def test_the_review_queue_names_chunks_by_slug(world):
    page = logged_in(world, "reader").get("/review").text
    assert ">option-axes</a> v" in page and ">chunk " not in page


def test_each_promotion_shows_the_gate_result_behind_its_bank(world):
    page = logged_in(world, "reader").get("/banks").text
    table = page[
        page.index('id="promotions"') : page.index("</table>", page.index('id="promotions"'))
    ]
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        moved = next(e for e in registry.alias_history("production") if e.action.value == "move")
        decision_id = registry.get_bank(moved.to_bank_id).gate_decision_id
        gate = next(g for g in registry.list_gate_runs() if g.decision_id == decision_id)
        kept = sum(r.status.value == "selected" for r in registry.get_decision(decision_id).rows)
    row = next(r for r in table.split("<tr>") if f"r{moved.revision}<" in r and "production" in r)
    assert f'href="/gates/{gate.id}"' in row and f">{kept}</td>" in row
