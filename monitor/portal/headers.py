"""Security headers on every response of the portal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.types import Receive, Scope, Send


class SecurityHeaders:
    """Security headers on every response: no framing, no foreign scripts, no sniffing; and
    under TLS (``hsts``: here or at a proxy) browsers told to use HTTPS only for a year."""

    def __init__(self, app: Callable[..., Awaitable[None]], hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                extra = {
                    b"x-frame-options": b"DENY",
                    b"x-content-type-options": b"nosniff",
                    b"referrer-policy": b"same-origin",
                    b"content-security-policy": b"default-src 'self'; img-src 'self' data:;"
                    b" style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
                    b"cache-control": b"no-store",
                }
                if self.hsts:
                    extra[b"strict-transport-security"] = b"max-age=31536000"
                headers += [(k, v) for k, v in extra.items() if k not in names]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
