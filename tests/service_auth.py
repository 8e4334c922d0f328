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
