"""Header rules of every registry request and answer, whichever layer handles it."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Answers are JSON (or empty): a browser must never sniff one into HTML or script, which is
# what a stored free-form document could otherwise be made to look like.
_ALWAYS = [(b"x-content-type-options", b"nosniff")]
_TWO_AUTHORIZATIONS = json.dumps({"detail": "send one Authorization header, not several"}).encode()


class StandardHeaders:
    """ASGI middleware, outermost: adds `_ALWAYS` to every HTTP response start, and answers 400
    to a request with more than one Authorization header (layers disagreed on which counts:
    the frozen-bank cache read the last, the routes the first)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_ALWAYS]}
            await send(message)

        if [name for name, _ in scope["headers"]].count(b"authorization") > 1:
            await send_with_headers(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"%d" % len(_TWO_AUTHORIZATIONS)),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _TWO_AUTHORIZATIONS})
            return
        await self.app(scope, receive, send_with_headers)
