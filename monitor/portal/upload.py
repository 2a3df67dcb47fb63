"""The verify form's upload, read as it arrives: its CSRF field first, then the file straight
to disk.

Starlette's ``request.form()`` reads the whole body (spooling files to the temporary folder)
before a field can be looked at; here the form's first field, ``csrf``, is checked before
anything more is read, and the file is written to the caller's private folder chunk by chunk.
The body's size is bounded by limits.BodyLimit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from pathlib import Path

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

FIELD_MAX = 1024  # the csrf field's value: a token is 32 characters
HEADERS_MAX = 8 * 1024  # one part's headers


class BadUpload(Exception):
    """Not the form's upload: the message is for the person (a 400)."""


class _Parts:
    """A multipart/form-data body as a sequence of parts, each read as its bytes arrive."""

    def __init__(self, request: Request) -> None:
        kind, params = parse_options_header(request.headers.get("content-type"))
        boundary = params.get(b"boundary")
        if kind != b"multipart/form-data" or not boundary:
            raise BadUpload("expected the form's upload (multipart/form-data)")
        self._chunks = request.stream()
        # (event, bytes): ("part", its Content-Disposition), ("data", bytes), ("end", b""), ("done", b"")
        self._events: deque[tuple[str, bytes]] = deque()
        self._header = [b"", b""]
        self._disposition = b""
        self._header_bytes = 0
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._begin,
                "on_header_field": lambda data, start, end: self._add_header(0, data[start:end]),
                "on_header_value": lambda data, start, end: self._add_header(1, data[start:end]),
                "on_header_end": self._header_end,
                "on_headers_finished": lambda: self._events.append(("part", self._disposition)),
                "on_part_data": lambda data, start, end: self._events.append(("data", data[start:end])),
                "on_part_end": lambda: self._events.append(("end", b"")),
                "on_end": lambda: self._events.append(("done", b"")),
            },
        )

    def _begin(self) -> None:
        self._disposition = b""
        self._header_bytes = 0

    def _add_header(self, which: int, data: bytes) -> None:
        self._header_bytes += len(data)
        if self._header_bytes > HEADERS_MAX:
            raise BadUpload("a part of the form has too long a header")
        self._header[which] += data

    def _header_end(self) -> None:
        name, value = self._header
        if name.strip().lower() == b"content-disposition":
            self._disposition = value
        self._header = [b"", b""]

    async def _next(self) -> tuple[str, bytes]:
        while not self._events:
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                raise BadUpload("the upload ended before the form did") from None
            try:
                self._parser.write(chunk)
            except MultipartParseError:
                raise BadUpload("the upload is not a well-formed form") from None
        return self._events.popleft()

    async def part(self) -> tuple[str, str | None]:
        """The next part's field name and file name (None: a plain field)."""
        found = await self.next_part()
        if found is None:
            raise BadUpload("the form ended before all of its fields came")
        return found

    async def next_part(self) -> tuple[str, str | None] | None:
        """:meth:`part`, or None at the form's end."""
        event, disposition = await self._next()
        if event == "done":
            return None
        if event != "part":
            raise BadUpload("the form ended before all of its fields came")
        _, options = parse_options_header(disposition)
        filename = options.get(b"filename")
        return (
            options.get(b"name", b"").decode("utf-8", "replace"),
            None if filename is None else filename.decode("utf-8", "replace"),
        )

    async def data(self) -> AsyncIterator[bytes]:
        """The current part's bytes as they arrive, to its end."""
        while (event := await self._next())[0] == "data":
            yield event[1]

    async def text(self, limit: int) -> str:
        """The current part as text; past ``limit`` bytes it is cut and the rest not read."""
        value = b""
        async for chunk in self.data():
            value += chunk
            if len(value) > limit:
                break
        return value.decode("utf-8", "replace")

    async def finish(self) -> None:
        """Read the rest (the closing boundary, or parts nobody asked for) to the body's end."""
        while (await self._next())[0] != "done":
            pass


async def receive_file(
    request: Request,
    check_csrf: Callable[[str], None],
    field: str,
    path: Path,
    *,
    fields: Collection[str] = (),
    files: Mapping[str, Path] | None = None,
) -> tuple[str, dict[str, str], set[str]]:
    """Read the upload form: its first field must be ``csrf``, handed to ``check_csrf`` (which
    raises to refuse) before anything more is read; then the file of ``field`` is written to
    ``path`` as it arrives. After it, the plain ``fields`` named are read (each to FIELD_MAX)
    and the optional ``files`` (field -> path) written; any other part is read past.
    Returns the file's name as the browser gave it, the fields given and the files received."""
    parts = _Parts(request)
    name, _ = await parts.part()
    check_csrf(await parts.text(FIELD_MAX) if name == "csrf" else "")
    name, bundle_name = await parts.part()
    if name != field or not bundle_name:
        raise BadUpload(f"{field}: choose a bundle (.zip) to verify")
    await _write(parts, path)
    values: dict[str, str] = {}
    received: set[str] = set()
    optional = files or {}
    while (found := await parts.next_part()) is not None:
        name, filename = found
        if filename is None and name in fields:
            values[name] = await parts.text(FIELD_MAX)
        elif filename and name in optional:  # a file input left empty sends no file name
            await _write(parts, optional[name])
            received.add(name)
        else:
            async for _ in parts.data():
                pass
    return bundle_name, values, received


async def _write(parts: _Parts, path: Path) -> None:
    with path.open("wb") as out:
        async for chunk in parts.data():
            out.write(chunk)
