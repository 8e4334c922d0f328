"""Checks of a service's bearer-token policy over HTTP, shared by the evaluator's and the
analyst's auth tests (each writes its own `ROLES_OF` by hand; these only apply it)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")
ANONYMOUS = {"/healthz", "/readyz"}  # and /metrics, which OpenAPI does not list


def published_policy(url: str) -> tuple[dict[tuple[str, str], set[str]], set[str]]:
    """(roles per (METHOD, path) from each operation's `x-roles`, paths without any)."""
    document = httpx.get(f"{url}/openapi.json", timeout=30).json()
    published, anonymous = {}, set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "x-roles" in operation:
                published[(method.upper(), path)] = set(operation["x-roles"])
            else:
                anonymous.add(path)
    return published, anonymous


def assert_route_admits_only(
    url: str,
    method: str,
    path: str,
    admitted: set[str],
    tokens: Mapping[str, str],
    *,
    params: Mapping[str, object] | None = None,
) -> None:
    """No token or an unknown one: 401 (before the body is validated); a role not admitted:
    403 naming it; an admitted role gets through (200, or 404/422 for the placeholder ids and
    the invalid body sent on purpose)."""
    body = {} if method == "POST" else None

    def call(headers: dict[str, str]) -> httpx.Response:
        return httpx.request(
            method, url + path, json=body, params=params, headers=headers, timeout=60
        )

    missing = call({})
    assert missing.status_code == 401, missing.text
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "missing bearer token"}
    unknown = call({"Authorization": "Bearer not-a-token"})
    assert (unknown.status_code, unknown.json()) == (401, {"detail": "unknown bearer token"})
    assert call({"Authorization": f"Basic {tokens['operator']}"}).status_code == 401
    for role in ROLES:
        answer = call({"Authorization": f"Bearer {tokens[role]}"})
        if role in admitted:
            assert answer.status_code in (200, 404, 422), (role, answer.text)
        else:
            assert answer.status_code == 403, (role, answer.text)
            assert f"role '{role}' may not do this" in answer.json()["detail"]


def assert_probes_and_metrics_are_anonymous(url: str) -> None:
    ready = httpx.get(f"{url}/readyz", timeout=30)
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["tokens"] == "ok"
    assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
    metrics = httpx.get(f"{url}/metrics", timeout=30)
    assert metrics.status_code == 200 and "http_requests_total" in metrics.text


# Above uvicorn's thread pool (40) and the services' one job worker.
CONCURRENT_REQUESTS = 64


def assert_concurrent_callers_each_get_their_roles_answer(
    url: str, path: str, admitted: set[str], tokens: Mapping[str, str]
) -> None:
    """CONCURRENT_REQUESTS GETs at once, cycling through no token, an unknown one, a header
    holding 2,000 characters of junk and every role's token: each answers as its own token
    says (never another caller's answer, never a 5xx or a timeout)."""
    from concurrent.futures import ThreadPoolExecutor

    callers = [None, "not-a-token", "x" * 2000, *ROLES]

    def expected(caller: str | None) -> set[int]:
        if caller in ROLES:
            return {200, 404} if caller in admitted else {403}
        return {401}

    def call(index: int) -> tuple[str | None, int]:
        caller = callers[index % len(callers)]
        token = tokens[caller] if caller in ROLES else caller
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return caller, httpx.get(url + path, headers=headers, timeout=120).status_code

    with ThreadPoolExecutor(max_workers=CONCURRENT_REQUESTS) as pool:
        answers = list(pool.map(call, range(CONCURRENT_REQUESTS)))
    wrong = [(caller, code) for caller, code in answers if code not in expected(caller)]
    assert not wrong, wrong


def assert_registry_gone_is_not_ready_and_still_guarded(
    url: str, path: str, admitted_role: str, tokens: Mapping[str, str]
) -> None:
    """With its registry unreachable the service says not ready (503 + Retry-After, naming
    the registry), still refuses callers without a token, and an admitted caller gets an
    answer, not a hang or a trace."""
    ready = httpx.get(f"{url}/readyz", timeout=60)
    assert ready.status_code == 503 and "Retry-After" in ready.headers, ready.text
    assert ready.json()["checks"]["registry"] != "ok"
    assert httpx.get(url + path, timeout=60).status_code == 401
    answer = httpx.get(
        url + path, headers={"Authorization": f"Bearer {tokens[admitted_role]}"}, timeout=60
    )
    assert answer.status_code < 500 or answer.status_code == 503, answer.text
    assert "Traceback" not in answer.text
