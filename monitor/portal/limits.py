"""What a request may cost the portal before anyone is known: body sizes by route, host names,
redirects and the range of dates and times a page or the API takes.

All of it is pure ASGI (or a plain check) so that it acts before Starlette reads a form: a
body over its route's limit is refused from its Content-Length without reading it, or cut
as it streams, and never reaches the temporary folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, tzinfo
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from monitor.errors import UsageError
from monitor.times import FIRST_DAY, LAST_DAY

KB = 1024
MB = 1024 * KB
SMALL = 8 * KB  # a login, a logout, an acknowledgement, a bundle's window: a few fields
FORM = 64 * KB  # forms with free text: event forms (recipient lists), notice actions (reasons)
ENVELOPE = 64 * KB  # an upload's multipart headers and its csrf field, beside the file

# POST routes (as in app.py's routes) and their bodies' limit; the upload's is configured.
# Any other request (a GET has no business with a body) gets SMALL.
FORMS: dict[str, int] = {
    "/login": SMALL,
    "/logout": SMALL,
    "/sites/{site}/events/{kind}": FORM,
    "/sites/{site}/alerts/{alert}/acknowledge": SMALL,
    "/notices/{notice}/{action}": FORM,
    "/sites/{site}/evidence/bundle": SMALL,
    "/complaint": FORM,  # a resident's complaint (no account): its fields are bounded too
    "/complaints/{complaint}/{action}": FORM,
}
UPLOAD = "/sites/{site}/evidence/verify"

# Host names every portal answers to; portal.hostnames adds to them.
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class _TooLarge(Exception):
    """Raised from the wrapped receive: the body went over its route's limit."""


def _pattern(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", path) + "$")


def _size(limit: int) -> str:
    return f"{limit // MB} MB" if limit >= MB else f"{limit // KB} KB"  # an upload: its file's limit


class BodyLimit:
    """Request bodies bounded by route before they are read.

    A Content-Length over the limit is answered 413 at once; a body without one (chunked) is
    counted as the application reads it and cut at the limit (413). A response sent while the
    body is still unread closes the connection, so the server does not read the rest either.
    """

    def __init__(self, app: ASGIApp, max_upload_mb: int) -> None:
        self.app = app
        self.limits = [(_pattern(path), limit) for path, limit in FORMS.items()]
        self.limits.append((_pattern(UPLOAD), max_upload_mb * MB + ENVELOPE))

    def limit(self, path: str) -> int:
        return next((limit for pattern, limit in self.limits if pattern.match(path)), SMALL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope["path"])
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await _refuse(limit)(scope, receive, send)
            return
        received = 0
        read_all = length in ("", "0") and "chunked" not in headers.get("transfer-encoding", "").lower()
        started = False

        async def limited_receive() -> Message:
            nonlocal received, read_all
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
                read_all = not message.get("more_body", False)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not read_all:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, limited_receive, closing_send)
        except _TooLarge:
            if started:
                raise
            await _refuse(limit)(scope, receive, send)


def _refuse(limit: int) -> PlainTextResponse:
    return PlainTextResponse(
        f"413 Content Too Large: at most {_size(limit)} may be sent here.",
        status_code=413,
        headers={"connection": "close"},
    )


class HostCheck:
    """Only requests for the portal's own names: localhost, the address a request came in on
    (the portal's own) and ``portal.hostnames``. Another Host header is refused (400), so a
    name pointed at the portal by someone else (DNS rebinding) finds nothing."""

    def __init__(self, app: ASGIApp, hostnames: Iterable[str]) -> None:
        self.app = app
        self.allowed = LOCAL_NAMES | {host_name(h) for h in hostnames}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = host_name(Headers(scope=scope).get("host", ""))
        server = scope.get("server")
        if host and (host in self.allowed or (server is not None and host == str(server[0]).lower())):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            "400 Bad Request: this portal does not answer to that host name (portal.hostnames).",
            status_code=400,
        )
        await response(scope, receive, send)


def host_name(value: str) -> str:
    """'Portal.Example:8080' -> 'portal.example', '[::1]:8080' -> '::1'; '' when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else ""
    if value.count(":") == 1:
        value = value.split(":")[0]
    return value.rstrip(".")


def relative_slash_redirects(router: Router) -> None:
    """'/path/' to '/path' (and back) as Starlette's redirect_slashes does, but with a path-only
    Location: Starlette writes the request's Host header into it."""
    router.redirect_slashes = False
    fallback = router.default

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if scope["type"] == "http" and path != "/":
            other = {**scope, "path": path.rstrip("/") if path.endswith("/") else path + "/"}
            if any(route.matches(other)[0] is not Match.NONE for route in router.routes):
                query = scope.get("query_string", b"").decode("latin-1")
                # One leading slash: '//host/...' would be another site's address.
                location = "/" + other["path"].lstrip("/") + (f"?{query}" if query else "")
                await RedirectResponse(location, status_code=307)(scope, receive, send)
                return
        await fallback(scope, receive, send)

    router.default = default


def form_time(form: Mapping[str, Any], zone: tzinfo, name: str) -> datetime:
    """A form's or a query's time field ``name`` (site time, as a browser's datetime-local sends
    it), read by checked_time with the reading chosen in ``<name>_offset`` if the form has one."""
    return checked_time(str(form.get(name, "")), zone, name, str(form.get(f"{name}_offset", "")))


def twice_fields(
    form: Mapping[str, Any], zone: tzinfo, names: Iterable[str]
) -> dict[str, tuple[tuple[str, str], ...]]:
    """The time fields of a form (``names``) that hold a time the clocks showed twice: their two
    readings, for the choice a page shows beside each (templates/_twice.html)."""
    from monitor.times import readings_if_twice

    found = {name: readings_if_twice(str(form.get(name, "")), zone) for name in names}
    return {name: readings for name, readings in found.items() if readings}


def checked_time(text: str, zone: tzinfo, option: str, offset: str = "") -> datetime:
    """monitor.times.parse_time (which holds a time to FIRST_DAY..LAST_DAY), its refusal worded as
    pages and the API say it (UsageError, a 400). A browser's time field carries no offset: a time
    the clocks show twice (the hour repeated in autumn) is OccursTwice, naming both readings, until
    ``offset`` (the form's ``<field>_offset`` choice, or the API's) picks one."""
    from monitor.times import OccursTwice, TimeOutOfRange, parse_time

    try:
        return parse_time(text, zone, option, offset=offset)
    except OccursTwice as exc:
        raise OccursTwice(exc.in_words(), exc.option, exc.value, exc.readings) from None
    except TimeOutOfRange:
        given = text.strip()[:40]
        raise UsageError(
            f"{option}: must be a time from {FIRST_DAY} to {LAST_DAY} (UTC), got {given!r}"
        ) from None
