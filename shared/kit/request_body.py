"""The one way every service reads a request body: size limit, then auth, then parsing.

`RequestBodyGuard` wraps each service's app (registry, evaluator, analyst). A body over the
limit is a 413 before any of it is buffered past the limit; a service that names its token table
refuses a request without a valid bearer token (401) before reading its body at all; a body in
another encoding than UTF-8 is a 415 and one that nests deeper than the limit a 422, before the
parser sees it. Only then does the app see the body, as one message."""

from __future__ import annotations

import itertools
import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.kit.auth import TokenTable, Unauthorized

# Deep enough for every evaluator and analyst request body (none nests past 5 levels), far
# below where parsing or echoing a body would recurse without bound.
SERVICE_JSON_DEPTH = 32

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_A_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# The parser (json.loads on bytes) also reads UTF-16 and UTF-32, which the byte scan below
# cannot see brackets in; only UTF-8 (with or without a BOM) is let through to it.
_UTF8 = ("utf-8", "utf-8-sig")


def nesting_depth(body: bytes, limit: int) -> int:
    """How deeply the JSON text `body` nests arrays and objects (exact up to `limit`; a body
    with no more than `limit` opening brackets is not scanned). Strings are skipped, so a
    bracket inside one does not count. No recursion and no Python loop per byte: the check
    must hold for a 1 MiB body of `[` without costing the ordinary request anything."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return 0
    brackets = _NOT_A_BRACKET.sub(b"", _JSON_STRING.sub(b"", body))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


class RequestBodyGuard:
    """ASGI middleware for requests with a body (any method but GET, HEAD, OPTIONS): 413 when
    Content-Length passes `max_bytes`; then, given `tokens`, 401 (with WWW-Authenticate)
    unless the bearer token is valid (which role a route admits stays the route's business);
    then 413 when the bytes actually sent pass `max_bytes`; 415 when the body is JSON in another
    encoding than UTF-8; 422 when the body nests arrays and
    objects deeper than `max_depth`.

    The body is read here in full (the app would buffer it anyway) so that a chunked upload
    declaring no length is measured too, and the app then sees it as one message. The depth
    check guards every route alike: past it, parsing, validating or echoing the body in an
    error would recurse without bound (the parser gives up near 1,000 levels; the encoder that
    writes the audit log at 254).
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, max_depth: int, tokens: TokenTable | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send)
                return
        if self.tokens is not None:
            try:
                self.tokens.authenticate(_header(scope, b"authorization"))
            except Unauthorized as refusal:
                await _answer(send, 401, {"detail": refusal.detail}, _CHALLENGE)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and json.detect_encoding(body) not in _UTF8:
            await _answer(send, 415, {"detail": "a JSON body must be UTF-8 (RFC 8259)"})
            return
        if nesting_depth(body, self.max_depth) > self.max_depth:
            await self._too_deep(send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body: wait for a disconnect
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        detail = f"request body larger than {self.max_bytes} bytes"
        await _answer(send, 413, {"detail": detail})

    async def _too_deep(self, send: Send) -> None:
        problem = {
            "loc": ["body"],
            "msg": f"JSON nests arrays and objects more than {self.max_depth} levels deep",
            "type": "json_too_deep",
        }
        await _answer(send, 422, {"detail": [problem]})


_CHALLENGE = [(b"www-authenticate", b"Bearer")]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def _answer(
    send: Send, status: int, content: dict, extra: list[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
