"""Headers every registry answer carries, whichever layer produced it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Answers are JSON (or empty): a browser must never sniff one into HTML or script, which is
# what a stored free-form document could otherwise be made to look like.
_ALWAYS = [(b"x-content-type-options", b"nosniff")]


class StandardHeaders:
    """ASGI middleware, outermost: adds `_ALWAYS` to every HTTP response start."""

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

        await self.app(scope, receive, send_with_headers)
