"""How every IntraSkill service reads a request body, checked over HTTP (the evaluator's and
the analyst's hardening tests apply it): size limit first, then the token, then parsing.

The limit is the one the docs and the registry state (1 MiB, 413); an anonymous caller gets a
401 for any body, malformed or too deep, before the service parses it (docs: "before the body
is validated"); a caller with a token gets the parser's 422 for a malformed or too deeply
nested body."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

LIMIT = 1 << 20  # the registry's and the services' shipped max_body_bytes
TOO_BIG = b'{"pad": "' + b"a" * (2 * LIMIT) + b'"}'
TOO_DEEP = b"[" * 5000 + b"]" * 5000


def _chunked(body: bytes, size: int = 64 << 10) -> Iterator[bytes]:
    """The body as a chunked upload: no Content-Length for the server to trust."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def assert_bodies_are_limited_then_authenticated_then_parsed(
    url: str, path: str, headers: dict[str, str]
) -> None:
    """`headers` carry the token of a role the route admits."""
    json_type = {"Content-Type": "application/json"}

    def post(content, extra=None) -> httpx.Response:
        return httpx.post(
            url + path, content=content, headers={**json_type, **(extra or {})}, timeout=120
        )

    for who in (None, headers):  # the size check comes first, for anyone
        answer = post(TOO_BIG, who)
        assert answer.status_code == 413, (who, answer.status_code, answer.text[:200])
        assert answer.json() == {"detail": f"request body larger than {LIMIT} bytes"}
    chunked = post(_chunked(TOO_BIG), headers)
    assert chunked.status_code == 413, chunked.text[:200]

    for body in (b"{not json", TOO_DEEP, b'{"checkpoint_id": 5}'):
        anonymous = post(body)
        assert anonymous.status_code == 401, (body[:20], anonymous.text[:200])
        assert anonymous.headers["www-authenticate"] == "Bearer"
        assert anonymous.json() == {"detail": "missing bearer token"}
        unknown = post(body, {"Authorization": "Bearer not-a-token"})
        assert (unknown.status_code, unknown.json()) == (401, {"detail": "unknown bearer token"})
    anonymous_chunked = post(_chunked(b"{not json"))
    assert anonymous_chunked.status_code == 401, anonymous_chunked.text[:200]

    malformed = post(b"{not json", headers)
    assert malformed.status_code == 422, malformed.text[:200]
    too_deep = post(TOO_DEEP, headers)
    assert too_deep.status_code == 422, too_deep.text[:200]
    assert too_deep.json()["detail"][0]["type"] == "json_too_deep"
