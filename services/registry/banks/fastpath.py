"""A response cache in front of the app for the hottest read: a frozen bank by id.

Trainer and evaluator workers fetch the bank they run under again and again. A frozen bank never
changes, so once its document is cached this middleware answers `GET /v1/banks/{id}` (200, or
304 on a matching If-None-Match) straight from memory, skipping routing and dependency
resolution, which are most of a request's cost. It answers only for a valid token and a cached
frozen bank; everything else (no or unknown token, a draft, a cache miss) goes to the normal
route, which produces the same headers and body and fills the cache.
"""

from __future__ import annotations

import re

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from services.registry.banks.routes import IMMUTABLE
from services.registry.concurrency import etag_matches
from shared.contracts.registry_api.schemas import MAX_ID
from shared.kit.auth import Unauthorized
from shared.kit.observability import ROUTE_TEMPLATE_KEY

ROUTE_TEMPLATE = "/v1/banks/{bank_id}"
_PATH = re.compile(r"/v1/banks/([1-9][0-9]{0,9})")


class FrozenBankFastPath:
    def __init__(self, app: ASGIApp, registry: FastAPI) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _PATH.fullmatch(scope["path"])
            if (
                match
                and int(match.group(1)) <= MAX_ID
                and await self._answer(scope, send, int(match.group(1)))
            ):
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, send: Send, bank_id: int) -> bool:
        state = self.registry.state
        cached = state.bank_cache.get(bank_id)
        if cached is None:
            return False
        authorization = if_none_match = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"if-none-match":
                if_none_match = value.decode("latin-1")
        try:
            state.tokens.authenticate(authorization)
        except Unauthorized:
            return False  # the route answers 401 with its usual body and headers
        headers = [(b"etag", cached.etag.encode()), (b"cache-control", IMMUTABLE.encode())]
        scope[ROUTE_TEMPLATE_KEY] = ROUTE_TEMPLATE  # counted as the route it stands in for
        if etag_matches(if_none_match, cached.etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return True
        headers += [
            (b"content-length", str(len(cached.body)).encode()),
            (b"content-type", b"application/json"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": cached.body})
        return True
