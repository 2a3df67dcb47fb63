"""InfluxDB output: line protocol, a writer for the v1 and v2 APIs, and the forwarder.

    store ──put──► Outbox (SQLite) ──peek──► InfluxForwarder ──write──► InfluxWriter ──► InfluxDB
                        ▲                          │                     v1: POST /write (deadline_http.post)
                        └── ack / reject / keep ◄──┘                     v2: POST /api/v2/write
                                                                             (influxdb-client)
No redirect is followed by either. ``timeout_s`` bounds the whole request, the host name's
lookup to the last byte of the answer: v1's through deadline_http, v2's through the connections
``deadline_pool`` gives influxdb-client's urllib3 pool (its own timeout bounds each socket read).

Errors are classified once, in ``_translate`` (the way Telegraf's influxdb_v2
``http.go`` sorts responses; docs/CONTRIBUTING.md, "Errors are classified once"):

    2xx                     written
    400, 422                not retryable: the batch is bisected so that only the
                            offending points are rejected (a single bad point must
                            not block the queue). A point is the one at fault only
                            when the server takes others: when every point alone is
                            refused alike, one point is sent alone (the last the
                            server took, kept across restarts in the outbox, or the
                            newest queued); taken, the points are
                            rejected (a field type conflict over a whole batch);
                            refused too (a proxy in front, a wrong path), none is
                            rejected; the batch stays queued, retried with backoff
    413                     too large: the batch is bisected the same way; a single
                            point refused so is rejected, and the forwarder keeps to
                            the batch size the server took from then on
    a refusal naming the    retryable, whatever the status (``_SERVER_STATES``): InfluxDB 1.x's
    server's state          max-series-per-database or max-values-per-tag reached, a full disk,
                            a retention policy not found; the points are held (kept queued, in
                            order), said once, never rejected: the same point is taken once the
                            state changes. For a limit counted over points (series, tag values)
                            only the series refused alone are held; the batch's other points
                            are sent on, and later batches carry the oldest point of a held
                            series, not the rest. A point's own fault (a field type conflict,
                            a point beyond the retention policy, a line it cannot parse) is
                            rejected
    3xx                     retryable: never followed (a redirect would make the write a
                            body-less GET and take the credentials elsewhere); logged as
                            an error asking for the final address as url
    401, 403                retryable (a config fix is expected); logged as an error
    404 "database not found" (v1) -> CREATE DATABASE when allowed, then retry
    other 404               retryable
    429, 5xx, refused,      retryable, with exponential backoff and jitter,
    reset, timeouts         honouring ``Retry-After``

Points carry the record's own timestamp (never the wall clock), so a point that
is sent twice (at-least-once delivery after a crash) overwrites itself.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import logging
import math
import random
import re
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

from influxdb_client.rest import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from monitor import __version__, deadline_http
from monitor.config import InfluxConfig
from monitor.errors import ConfigError, OutputError
from monitor.influx import deadline_pool
from monitor.influx.outbox import Outbox
from monitor.influx.schema import MEASUREMENTS
from monitor.shown_text import one_line
from monitor.wire.canonical import from_us, to_us

__all__ = [
    "Backoff",
    "BatchResult",
    "FieldValue",
    "ForwarderStats",
    "InfluxForwarder",
    "InfluxWriteError",
    "InfluxWriter",
    "bisect_write",
    "line",
]

log = logging.getLogger(__name__)

_USER_AGENT = f"minewatch/{__version__}"

FieldValue: TypeAlias = float | int | bool | str | None

# --------------------------------------------------------------------------- line protocol

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INT64 = (-(2**63), 2**63 - 1)
# https://docs.influxdata.com/influxdb/v1.6/write_protocols/line_protocol_reference/#special-characters
_MEASUREMENT_ESCAPES = str.maketrans({",": r"\,", " ": r"\ "})
_KEY_ESCAPES = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ "})  # tag keys, tag values, field keys
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"'})  # newlines stay literal inside quotes


def _escape_key(kind: str, text: str) -> str:
    # A newline ends the line, and a trailing backslash would escape the separator
    # after it: neither can be represented outside a quoted string.
    if not text or "\n" in text or "\r" in text or text.endswith("\\"):
        raise ValueError(f"{kind} {text!r} cannot be written as line protocol")
    return text.translate(_KEY_ESCAPES)


def _field_value(name: str, value: float | int | bool | str) -> str | None:
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"field {name!r}: {value} does not fit InfluxDB's int64")
        return f"{value}i"
    if isinstance(value, float):
        # InfluxDB stores no NaN or infinity; a missing value is omitted like None.
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return '"' + value.translate(_STRING_ESCAPES) + '"'
    raise TypeError(f"field {name!r}: unsupported type {type(value).__name__}")


def timestamp_ns(ts: datetime) -> int:
    """Nanoseconds since the epoch, exact (no float rounding)."""
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ValueError(f"timestamp {ts.isoformat()} has no time zone")
    return (ts - _EPOCH) // timedelta(microseconds=1) * 1000


def line(
    measurement: str,
    tags: Mapping[str, str],
    fields: Mapping[str, FieldValue],
    ts: datetime,
    *,
    offset_ns: int = 0,
) -> str:
    """One point in line protocol, checked against ``monitor.influx.schema``, at ``ts`` plus
    ``offset_ns`` nanoseconds (a datetime holds microseconds; ``points.spread_ns`` moves records apart).

    Unknown measurements, tags or fields are programmer errors (ValueError), as is a
    point with no field left once None (and NaN/inf) fields are omitted. Empty tag
    values are omitted: InfluxDB rejects them.
    """
    schema = MEASUREMENTS.get(measurement)
    if schema is None:
        raise ValueError(f"unknown measurement {measurement!r}; known: {', '.join(sorted(MEASUREMENTS))}")
    unknown_tags = sorted(set(tags) - set(schema.tags))
    if unknown_tags:
        raise ValueError(f"{measurement}: unknown tags {unknown_tags}; known: {list(schema.tags)}")
    unknown_fields = sorted(set(fields) - set(schema.fields))
    if unknown_fields:
        raise ValueError(f"{measurement}: unknown fields {unknown_fields}; known: {list(schema.fields)}")
    parts = [measurement.translate(_MEASUREMENT_ESCAPES)]
    # Sorted tags: InfluxDB's recommended order, and the same point gives the same line.
    for key in sorted(tags):
        if tags[key]:
            parts.append(f"{_escape_key('tag key', key)}={_escape_key('tag value', tags[key])}")
    encoded = []
    for key in sorted(fields):
        value = fields[key]
        text = None if value is None else _field_value(key, value)
        if text is not None:
            encoded.append(f"{_escape_key('field key', key)}={text}")
    if not encoded:
        raise ValueError(f"{measurement}: a point needs at least one field, got {dict(fields)!r}")
    return f"{','.join(parts)} {','.join(encoded)} {timestamp_ns(ts) + offset_ns}"


# --------------------------------------------------------------------------- errors and backoff


class InfluxWriteError(OutputError):
    """A write failed. ``status`` is the HTTP status (None: no answer); ``retry_after_s`` from the server.

    ``held``: the server's own state that refused the points (``_SERVER_STATES``), "" for any
    other failure; such a refusal is retryable whatever its status. ``smaller_may_fit``: that
    state is a limit counted over the request's points, so a part of the batch may be taken.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after_s: float | None = None,
        held: str = "",
        smaller_may_fit: bool = False,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.retry_after_s = retry_after_s
        self.held = held
        self.smaller_may_fit = smaller_may_fit


def _retry_after(value: str | None) -> float | None:
    """RFC 9110 section 10.2.3: delay-seconds or an HTTP-date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_message(body: bytes | str | None, fallback: str) -> str:
    """The server's own words: v1 says {"error": ...}, v2 says {"code": ..., "message": ...}."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("message", "error"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return text.strip()[:500] or fallback


# Refusals that name the server's state, not the point's fault: the same point is taken once the
# state changes, so the points are held (kept queued, retried with backoff), never rejected, whatever
# the status. InfluxDB 1.x says them in a 400 "partial write: ... dropped=N" (influxd 1.6.7:
# 'partial write: max-series-per-database limit exceeded: (3) dropped=1', 'partial write:
# max-values-per-tag limit exceeded (2/2): measurement="sound" tag="sensor" value="c" dropped=1';
# 1.7: 'partial write: write /var/lib/influxdb/data/db/_series/06/0002: no space left on device
# dropped=1') or a 500 ('retention policy not found: year', 'engine: cache-max-memory-size
# exceeded: (n/limit)', 'engine: error writing WAL entry: ...: no space left on device').
# The points' own faults stay rejected: 'field type conflict', 'unable to parse', 'points beyond
# retention policy' (older than the retention policy keeps: never taken by this database).
# The third item: the limit counts the request's points, so a smaller batch may be taken (influxd
# 1.6.7 with max-series-per-database 4 and 2 series refused 8 and 4 points of a third series in
# one request, "dropped=8", and took 2, then the 8).
_SERVER_STATES: tuple[tuple[str, str, bool], ...] = (
    ("max-series-per-database limit exceeded", "InfluxDB's [data] max-series-per-database is reached", True),
    ("max-values-per-tag limit exceeded", "InfluxDB's [data] max-values-per-tag is reached", True),
    ("no space left on device", "InfluxDB's disk is full", False),
    ("retention policy not found", "the retention policy (retention_policy) does not exist", False),
    (
        "cache-max-memory-size exceeded",
        "InfluxDB's write cache is full ([data] cache-max-memory-size)",
        False,
    ),
)


def _classify(status: int, message: str, retry_after_s: float | None) -> InfluxWriteError:
    text = f"InfluxDB answered {status}: {message}"
    lowered = message.lower()
    state = next((entry for entry in _SERVER_STATES if entry[0] in lowered), None)
    if state is not None:
        _, held, smaller_may_fit = state
        return InfluxWriteError(
            text,
            retryable=True,
            status=status,
            retry_after_s=retry_after_s,
            held=held,
            smaller_may_fit=smaller_may_fit,
        )
    if status in (400, 413, 422):
        return InfluxWriteError(text, retryable=False, status=status)
    return InfluxWriteError(text, retryable=True, status=status, retry_after_s=retry_after_s)


# Everything a request (deadline_http.post) may raise when there is no answer.
_FOREIGN: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException, Urllib3Error, ApiException)


def _translate(exc: BaseException, url: str) -> InfluxWriteError:
    """The one place where socket, http.client, urllib3 and influxdb-client errors become ours
    (v1 answers: ``InfluxWriter._send``)."""
    if isinstance(exc, ApiException) and not exc.status:
        # No answer: influxdb-client makes urllib3's SSLError (a certificate not trusted, a
        # handshake refused) an ApiException of status 0, its reason "SSLError\n<what>".
        reason = ": ".join(part for part in str(exc.reason or "").splitlines() if part)
        return InfluxWriteError(f"InfluxDB unreachable: {one_line(reason)}", retryable=True)
    if isinstance(exc, ApiException):  # v2: influxdb-client's answer other than 2xx
        headers: Mapping[str, str] = exc.headers or {}
        status = int(exc.status)
        if 300 <= status < 400:  # influxdb-client follows none (retries=False); said as v1 says it
            return _redirect_error(url, status, headers.get("Location"))
        return _classify(
            status, _error_message(exc.body, str(exc.reason)), _retry_after(headers.get("Retry-After"))
        )
    # Connection refused or reset, timeouts, broken responses.
    return InfluxWriteError(f"InfluxDB unreachable: {type(exc).__name__}: {exc}", retryable=True)


def _redirect_error(url: str, status: int, location: str | None) -> InfluxWriteError:
    """A 3xx: followed, it would turn the write into a body-less GET whose 2xx reads as "written",
    and carry the credentials to another address."""
    shown_location = one_line((location or "nowhere")[:300])
    return InfluxWriteError(
        f"InfluxDB at {url} answered {status} (a redirect to {shown_location}):"
        " minewatch does not follow redirects; set url to the final address",
        retryable=True,
        status=status,
    )


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: ``base_s * 2**(failures-1)``, spread by ±``jitter``, at most ``max_s``.

    A server's Retry-After is honoured as a floor, capped at ``max_s`` like
    Telegraf's influxdb_v2 output, so a huge value cannot stall the queue.
    """

    base_s: float = 1.0
    max_s: float = 60.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not (0 < self.base_s <= self.max_s and 0 <= self.jitter < 1):
            raise ValueError(f"need 0 < base_s <= max_s and 0 <= jitter < 1, got {self}")

    def delay(self, failures: int, retry_after_s: float | None = None, rand: float | None = None) -> float:
        r = random.random() if rand is None else rand
        exponential = self.base_s * 2.0 ** min(max(failures - 1, 0), 30)
        delay = min(exponential, self.max_s) * (1 + self.jitter * (2 * r - 1))
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return min(delay, self.max_s)


# --------------------------------------------------------------------------- writer


@dataclass(slots=True)
class BatchResult:
    """What became of a batch: ids accepted, ids rejected (with the reason), and the
    retryable error that stopped it, if any (ids in neither list stay queued).

    ``fits``: after a batch was refused as too large (413), the most points one request
    carried that the server took; None when no 413 came, or a point alone explains it.
    ``refused_alike``: the status every point alone was refused with (then ``error`` says
    so, with the server's first answer, and nothing is rejected).
    ``probe_taken``: the server took the ``probe`` line (``bisect_write``).
    ``held_series``: the series (``series_key``) a point of which the server refused alone for a
    limit counted over points; their points are in neither list.
    """

    accepted: list[int] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    error: InfluxWriteError | None = None
    fits: int | None = None
    refused_alike: int | None = None
    probe_taken: bool = False
    held_series: set[str] = field(default_factory=set)


def bisect_write(
    items: Sequence[tuple[int, str]],
    send: Callable[[list[str]], None],
    *,
    server_takes_points: bool = True,
    refused_before: int | None = None,
    probe: str | None = None,
) -> BatchResult:
    """Send ``items``; on a non-retryable error, split the batch in halves until the bad points are alone.

    Halves go in order and the first retryable error stops the batch, so nothing
    after a kept point is acked before it. InfluxDB 1.x writes the good points of a
    400 batch anyway ("partial write"); re-sending them is harmless because a point
    with the same series and timestamp overwrites itself. A batch too large (413) is
    split the same way, down to one point, and so is a batch refused for a limit of the
    server counted over the request's points (``smaller_may_fit``: max-series-per-database,
    max-values-per-tag); any other refusal of the server's state stops the batch like a
    retryable error. A point refused alone for such a limit does not stop the batch: its
    series (measurement and tags) is held, its points kept queued and not sent again in this
    batch, and the other series' points are sent on, written or rejected as InfluxDB's own
    partial write would have them. InfluxDB names one reason a request, the limit before a
    field type conflict, so a point at fault behind a held one was otherwise found only once
    the limit was lifted. ``error`` then says the hold.

    A point is rejected as the point's fault only when the server takes others. When it
    takes none and refuses every point alone with the same status, either the points are
    bad (a field type conflict over the whole batch) or the server or the address is (a
    proxy that answers 400 to everything, a url with a wrong path). The status, not the
    words, tells them alike: a server's words may name the request (VictoriaMetrics quotes
    the client's address and the URI). ``probe`` tells them apart: a line sent alone at
    that moment, the last point the server took or one queued after ``items`` (a point
    written again overwrites itself). Taken, the server takes points at this url, and the
    points it refused are proven bad: they are rejected. Refused, the server or the address
    is at fault: nothing is rejected, and ``error`` (retryable) keeps the batch queued.
    Without a probe, the batch is kept; a batch of one point is the point's fault when
    ``server_takes_points`` (the last batch had points taken), else it is kept.
    ``refused_before``: these items were refused alike with this status last time; if the
    batch, then its first point and then the probe are refused so again, the batch is kept
    again (three requests, not a bisection of 2n - 1).
    """
    result = BatchResult()
    if refused_before is not None and items:
        try:
            send([text for _, text in items])
        except InfluxWriteError as exc:
            if exc.retryable and not exc.smaller_may_fit:
                result.error = exc
                return result
            try:
                if not exc.retryable:  # else a limit counted over the batch: bisected below
                    send([items[0][1]])
            except InfluxWriteError as first:
                if not first.retryable and first.status == refused_before:
                    taken = _probe(send, probe, result)
                    if result.error is not None:
                        return result
                    if not taken:
                        return _refused_alike(result, len(items), first)
        else:
            result.accepted.extend(item_id for item_id, _ in items)
            return result
    too_large = False  # a batch of several points was refused as too large
    point_too_large = False  # a point alone was
    largest_taken = 0
    leaf_errors: list[InfluxWriteError] = []
    held_series = result.held_series  # refused alone for a limit of the server (smaller_may_fit)

    def attempt(chunk: Sequence[tuple[int, str]]) -> bool:
        nonlocal too_large, point_too_large, largest_taken
        if held_series:  # the points of a held series stay queued unsent: each would be refused
            chunk = [item for item in chunk if series_key(item[1]) not in held_series]
            if not chunk:
                return True
        try:
            send([text for _, text in chunk])
        except InfluxWriteError as exc:
            if exc.retryable and exc.smaller_may_fit and len(chunk) == 1:
                # Its series is one too many: it waits for the limit, with the rest of its series;
                # the others are sent on, so that a point at fault behind it is still found.
                held_series.add(series_key(chunk[0][1]))
                result.error = exc
                return True
            if exc.retryable and not exc.smaller_may_fit:
                result.error = exc
                return False
            if exc.retryable:  # a limit counted over the request's points: its halves may fit
                middle = len(chunk) // 2
                return attempt(chunk[:middle]) and attempt(chunk[middle:])
            if len(chunk) == 1:
                point_too_large |= exc.status == 413
                result.rejected.append((chunk[0][0], str(exc)))
                leaf_errors.append(exc)
                return True
            too_large |= exc.status == 413
            middle = len(chunk) // 2
            return attempt(chunk[:middle]) and attempt(chunk[middle:])
        result.accepted.extend(item_id for item_id, _ in chunk)
        largest_taken = max(largest_taken, len(chunk))
        return True

    if items:
        attempt(items)
    if too_large and not point_too_large and largest_taken:
        result.fits = largest_taken
    refusals = {exc.status for exc in leaf_errors}
    if not (
        result.error is None
        and not result.accepted
        and len(refusals) == 1
        and len(leaf_errors) == len(items)
        and leaf_errors[0].status != 413  # a point too large alone is the point's fault
    ):
        return result
    if probe is None:
        if len(items) > 1 or not server_takes_points:
            return _refused_alike(result, len(items), leaf_errors[0])
        return result
    if result.probe_taken or _probe(send, probe, result):
        return result  # the server takes a point and refused each of these: they are bad
    if result.error is not None:
        result.rejected.clear()
        return result
    return _refused_alike(result, len(items), leaf_errors[0])


def series_key(text: str) -> str:
    """A line's series: its measurement and tags, up to the first space not escaped."""
    match = _SERIES.match(text)
    return match.group(0) if match else text


_SERIES = re.compile(r"(?:[^\\ ]|\\.)*")


def _probe(send: Callable[[list[str]], None], probe: str | None, result: BatchResult) -> bool:
    """Whether the server takes ``probe`` alone now (then ``result.probe_taken``); a retryable
    failure is ``result.error``, and says nothing of the points."""
    if probe is None:
        return False
    try:
        send([probe])
    except InfluxWriteError as exc:
        if exc.retryable:
            result.error = exc
        return False
    result.probe_taken = True
    return True


def _refused_alike(result: BatchResult, count: int, refusal: InfluxWriteError) -> BatchResult:
    result.rejected.clear()
    result.refused_alike = refusal.status
    what = "the point" if count == 1 else f"each of the {count} points alone"
    result.error = InfluxWriteError(
        f"InfluxDB took none of a batch and refused {what} alike, so the server or the url's path is"
        f" at fault, not the points; they stay queued and are retried: {refusal}",
        retryable=True,
        status=refusal.status,
    )
    return result


class InfluxWriter:
    """Writes lines of line protocol to InfluxDB 1.x (HTTP /write) or the v2 API (/api/v2/write).

    v1 through ``deadline_http.post``, v2 through influxdb-client: to the configured URL only,
    neither following a redirect. Not thread-safe: one forwarder thread owns it.
    """

    def __init__(self, config: InfluxConfig, *, create_database: bool = True, gzip: bool = False) -> None:
        problems = []
        if config.version not in (1, 2):
            problems.append(f"storage.influxdb.version: must be 1 or 2, got {config.version!r}")
        if config.version == 1 and not config.database:
            problems.append("storage.influxdb.database: required for version 1")
        if config.version == 2 and not (config.bucket and config.org):
            problems.append("storage.influxdb.bucket, org: required for version 2")
        if problems:
            raise ConfigError(problems)
        self.config = config
        # Where the points go, the key of the last point it took (Outbox.taken, kept in the store):
        # the url without what may hold a secret (user:password@, a query).
        parts = urllib.parse.urlsplit(config.url)
        port = f":{parts.port}" if parts.port else ""
        where = f"{parts.scheme}://{parts.hostname}{port}{parts.path.rstrip('/')}"
        if config.version == 1:
            self.target = f"v1 {where} db={config.database} rp={config.retention_policy}"
        else:
            self.target = f"v2 {where} org={config.org} bucket={config.bucket}"
        self.create_database = create_database
        self._create_logged = False
        self._base = config.url.rstrip("/")
        self._client: Any = None
        self._write_api: Any = None
        if config.version == 2:
            from influxdb_client.client.influxdb_client import InfluxDBClient
            from influxdb_client.client.write_api import SYNCHRONOUS

            # retries=False (the default): the forwarder owns retrying, with its own backoff, and
            # no redirect is followed. Its timeout bounds each socket read; the whole request is
            # bounded by deadline_pool (_write_v2), as v1's by monitor/deadline_http.py.
            self._client = InfluxDBClient(
                url=config.url,
                token=config.token.value,
                org=config.org,
                timeout=int(config.timeout_s * 1000),
                enable_gzip=gzip,
            )
            # The v2 API documents "text/plain; charset=utf-8"; influxdb-client 1.50's generated
            # WriteService replaces the charset its WriteApi passes with a bare "text/plain".
            # Default headers are applied last, and this client only ever writes.
            self._client.api_client.set_default_header("Content-Type", "text/plain; charset=utf-8")
            deadline_pool.bound_requests(self._client.api_client.rest_client.pool_manager)
            self._write_api = self._client.write_api(write_options=SYNCHRONOUS)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def write(self, lines: Sequence[str]) -> None:
        """Write all ``lines``; raises InfluxWriteError (``retryable`` says whether to try again)."""
        if not lines:
            return
        try:
            if self.config.version == 1:
                self._write_v1(lines)
            else:
                self._write_v2(lines)
        except _FOREIGN as exc:
            raise _translate(exc, self.config.url) from exc

    def write_batch(
        self,
        items: Sequence[tuple[int, str]],
        *,
        server_takes_points: bool = True,
        refused_before: int | None = None,
        probe: str | None = None,
    ) -> BatchResult:
        return bisect_write(
            items,
            self.write,
            server_takes_points=server_takes_points,
            refused_before=refused_before,
            probe=probe,
        )

    def _send(self, path: str, params: Mapping[str, str], body: bytes, headers: Mapping[str, str]) -> None:
        """One request; a 2xx returns, anything else raises InfluxWriteError."""
        url = f"{self._base}{path}?{urllib.parse.urlencode(params)}"
        answer = deadline_http.post(
            url, body, {"User-Agent": _USER_AGENT, **headers}, timeout_s=self.config.timeout_s
        )
        if 200 <= answer.status < 300:
            return
        if 300 <= answer.status < 400:
            raise _redirect_error(self.config.url, answer.status, answer.header("Location"))
        raise _classify(
            answer.status,
            _error_message(answer.body, answer.reason),
            _retry_after(answer.header("Retry-After")),
        )

    # v1 ---------------------------------------------------------------------

    def _v1_request(self, path: str, params: dict[str, str], body: bytes, content_type: str) -> None:
        headers = {"Content-Type": content_type}
        if self.config.username:
            credentials = f"{self.config.username}:{self.config.password.value}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode("ascii")
        self._send(path, params, body, headers)

    def _write_v1(self, lines: Sequence[str]) -> None:
        params = {"db": self.config.database, "precision": "ns"}
        if self.config.retention_policy:
            params["rp"] = self.config.retention_policy
        body = "\n".join(lines).encode("utf-8")
        try:
            self._v1_request("/write", params, body, "text/plain; charset=utf-8")
        except InfluxWriteError as error:
            if not (self.create_database and error.status == 404 and "database not found" in str(error)):
                raise
            if not self._create_logged:  # once: if creating fails, retries come back here
                log.warning("InfluxDB database %r not found; creating it", self.config.database)
                self._create_logged = True
            self._create_database_v1()
            self._v1_request("/write", params, body, "text/plain; charset=utf-8")

    def _create_database_v1(self) -> None:
        # /query answers 200 with {"results":[{"error": ...}]} for statement errors.
        name = self.config.database.replace("\\", "\\\\").replace('"', '\\"')
        query = urllib.parse.urlencode({"q": f'CREATE DATABASE "{name}"'}).encode()
        self._v1_request("/query", {}, query, "application/x-www-form-urlencoded")

    # v2 ---------------------------------------------------------------------

    def _write_v2(self, lines: Sequence[str]) -> None:
        from influxdb_client.domain.write_precision import WritePrecision

        with deadline_pool.one_deadline(self.config.timeout_s):
            self._write_api.write(
                bucket=self.config.bucket,
                org=self.config.org,
                record=list(lines),
                write_precision=WritePrecision.NS,
            )


# --------------------------------------------------------------------------- forwarder


@dataclass(frozen=True, slots=True)
class ForwarderStats:
    written: int = 0
    rejected: int = 0
    retries: int = 0
    last_error: str = ""
    up: bool = True  # False while writes are failing
    pending: int | None = None  # points queued, as last counted by the forwarder (None: not yet)
    held: str = ""  # while the server refuses points for a state of its own: which (_SERVER_STATES)
    state: str = ""  # what the forwarder said when its state last changed ("" while writing)
    since: datetime | None = None  # when that state began (wall clock)


class InfluxForwarder:
    """Moves points from the outbox to InfluxDB, in order, until stopped.

    ``run(stop)`` is the loop (call it on a thread of its own, or use ``start`` and
    ``close``); the outbox and the writer belong to that thread. ``flush`` and
    ``stats`` may be called from any thread once the loop runs. If you drive
    ``run`` yourself, set ``stop`` and join the thread before ``close``. After a
    restart it simply resumes from the outbox.
    """

    def __init__(
        self,
        outbox: Outbox,
        writer: InfluxWriter,
        *,
        batch_size: int = 5000,
        flush_interval_s: float = 1.0,
        backoff: Backoff | None = None,
    ) -> None:
        if batch_size < 1 or flush_interval_s <= 0:
            raise ValueError("batch_size must be >= 1 and flush_interval_s > 0")
        self.outbox = outbox
        self.writer = writer
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.backoff = backoff or Backoff()
        self._stats = ForwarderStats(since=datetime.now(UTC))
        self._changed = threading.Condition()
        self._wake = threading.Event()
        self._cycles = 0  # cycles started
        self._empty_cycle = -1  # the last cycle that found the outbox empty
        self._running = False
        self._failures = 0
        self._state = "up"  # or what is failing: "http 503", "unreachable", "internal OperationalError"
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self._server_takes_points = True  # the last batch had points taken (bisect_write)
        # The last point the server took, a probe (bisect_write); read from the outbox at the first
        # cycle, so that after a restart a batch refused alike is not held for want of one.
        self._taken: str | None = None
        self._taken_read = False
        self._held: tuple[tuple[int, ...], int] | None = None  # a batch refused alike, and the status
        # Series InfluxDB holds for a limit counted over points (BatchResult.held_series): one
        # point of each is sent a batch, so that their backlog does not hold what is queued behind.
        self._held_series: set[str] = set()
        # Where the scan of the queue past a held backlog resumes: for these held series, the id
        # up to which every queued point is of one of them, and the oldest point of each found there.
        self._held_scan: tuple[frozenset[str], int, tuple[tuple[int, str], ...]] | None = None

    @classmethod
    def from_config(
        cls, outbox: Outbox, config: InfluxConfig, *, backoff: Backoff | None = None
    ) -> InfluxForwarder:
        return cls(
            outbox,
            InfluxWriter(config),
            batch_size=config.batch_size,
            flush_interval_s=config.flush_interval_s,
            backoff=backoff,
        )

    @property
    def stats(self) -> ForwarderStats:
        with self._changed:
            return self._stats

    # ------------------------------------------------------------------ loop

    def run(self, stop: threading.Event) -> None:
        """Forward until ``stop`` is set. Never raises for output or outbox failures."""
        with self._changed:
            self._running = True
        try:
            while not stop.is_set():
                handled, error = self._guarded_cycle()
                # Points of other series than those InfluxDB holds were written: the next batch at
                # once, as after any batch written, not after the pause of a failure.
                if error is not None and not (handled and error.smaller_may_fit):
                    # Not cut short by flush(): the server may have asked for this pause.
                    self._sleep(self.backoff.delay(self._failures, error.retry_after_s), stop, wakeable=False)
                elif handled == 0:
                    self._sleep(self.flush_interval_s, stop, wakeable=True)
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()

    def start(self) -> None:
        """Run the loop on a daemon thread of its own (``close`` stops it)."""
        self._stop = threading.Event()
        with self._changed:  # before the thread runs, so flush() never drains inline beside it
            self._running = True
        self._thread = threading.Thread(
            target=self.run, args=(self._stop,), name="influx-forwarder", daemon=True
        )
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread started by ``start``, then close the writer and the outbox's connection."""
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(timeout)
        self.writer.close()
        self.outbox.close()

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued before this call is written or rejected.

        False if the timeout passed first (the rest stays queued, nothing is lost).
        With no loop running, drains on the calling thread.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            running = self._running
            target = self._cycles
        if not running:
            return self._drain_inline(deadline)
        self._wake.set()  # skip the idle wait (never a backoff) once
        with self._changed:
            return (
                self._changed.wait_for(
                    lambda: self._empty_cycle > target or not self._running,
                    max(0.0, deadline - time.monotonic()),
                )
                and self._empty_cycle > target
            )

    def _drain_inline(self, deadline: float) -> bool:
        while True:
            handled, error = self._guarded_cycle()
            if error is None and handled == 0:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if error is not None:
                time.sleep(min(remaining, self.backoff.delay(self._failures, error.retry_after_s)))

    def _sleep(self, seconds: float, stop: threading.Event, *, wakeable: bool) -> None:
        # In slices, so the caller's stop event (and flush()'s wake-up, if allowed) ends the wait.
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if wakeable and self._wake.wait(min(remaining, 0.05)):
                break
            if not wakeable:
                stop.wait(min(remaining, 0.05))
        self._wake.clear()

    def _guarded_cycle(self) -> tuple[int, InfluxWriteError | None]:
        """One batch; any failure becomes a retryable error so the loop keeps running."""
        try:
            handled, error = self._cycle()
        except Exception as exc:  # the outbox (SQLite busy, disk full) or a bug: keep going
            state = f"internal {type(exc).__name__}"
            if state != self._state:  # a traceback once, not on every retry
                log.exception("Influx forwarder failed; retrying")
            handled, error = 0, InfluxWriteError(f"forwarder: {type(exc).__name__}: {exc}", retryable=True)
            self._mark_down(error, state)
            self._recount()
            return handled, error
        if error is None:
            self._mark_up()
        else:
            if error.held:
                state = f"held: {error.held}"
            elif self._held is not None:
                state = f"refused alike {error.status}"
            else:
                state = f"http {error.status}" if error.status else "unreachable"
            self._mark_down(error, state)
        return handled, error

    def _cycle(self) -> tuple[int, InfluxWriteError | None]:
        with self._changed:
            self._cycles += 1
            cycle = self._cycles
        batch = self._next_batch()
        if not batch:
            with self._changed:
                self._empty_cycle = cycle
                self._stats = replace(self._stats, pending=0)
                self._changed.notify_all()
            return 0, None
        ids = tuple(item_id for item_id, _ in batch)
        held = self._held[1] if self._held is not None and self._held[0] == ids else None
        if not self._taken_read:
            self._taken = self.outbox.taken(self.writer.target)
            self._taken_read = True
        probe = self._taken
        if probe is None:  # none taken since the start: the newest point queued, if not in the batch
            newest = self.outbox.newest()
            probe = newest[1] if newest is not None and newest[0] > ids[-1] else None
        result = self.writer.write_batch(
            batch, server_takes_points=self._server_takes_points, refused_before=held, probe=probe
        )
        taken = dict(batch)[result.accepted[-1]] if result.accepted else None  # the last point taken
        if taken is not None:
            self._server_takes_points = True
            self._taken = taken
        elif result.probe_taken and probe is not None and probe != self._taken:
            self._taken = probe  # the newest queued point, kept queued
            self.outbox.keep_taken(self.writer.target, probe)
        if result.refused_alike is not None:
            self._server_takes_points = False
        if result.error is not None and not result.error.smaller_may_fit:
            # Stopped before its end (unreachable, a 5xx): a held series stays held unless taken.
            texts = dict(batch)
            taken_series = {series_key(texts[item_id]) for item_id in result.accepted}
            self._held_series = (self._held_series - taken_series) | result.held_series
        else:
            self._held_series = result.held_series
        self._held = None if result.refused_alike is None else (ids, result.refused_alike)
        if result.fits is not None and result.fits < self.batch_size:
            # Kept in memory: a restart starts from the configured size and learns it again.
            log.warning(
                "InfluxDB refused a batch of %d points as too large (413); sending at most %d a batch"
                " from now on (storage.influxdb.batch_size is %d)",
                len(batch),
                result.fits,
                self.batch_size,
            )
            self.batch_size = result.fits
        if taken is not None:
            self.outbox.ack(result.accepted, taken=(self.writer.target, taken))
        by_reason: dict[str, list[int]] = {}
        for item_id, reason in result.rejected:
            by_reason.setdefault(reason, []).append(item_id)
        for reason, refused in by_reason.items():
            log.warning(
                "InfluxDB rejected %d point(s), kept in the outbox's rejected table: %s", len(refused), reason
            )
            self.outbox.reject(refused, reason)
        handled = len(result.accepted) + len(result.rejected)
        if result.error is not None:
            done = set(result.accepted) | {item_id for item_id, _ in result.rejected}
            self.outbox.attempted([item_id for item_id, _ in batch if item_id not in done])
        pending = self.outbox.pending()
        with self._changed:
            self._stats = replace(
                self._stats,
                written=self._stats.written + len(result.accepted),
                rejected=self._stats.rejected + len(result.rejected),
                pending=pending,
                last_error=result.rejected[-1][1] if result.rejected else self._stats.last_error,
            )
        return handled, result.error

    def _next_batch(self) -> list[tuple[int, str]]:
        """The oldest points queued, ``batch_size`` at most; of a series InfluxDB holds for a limit
        (``_held_series``), only the oldest, which tries the hold again: the rest of them wait, in
        order, and the points queued behind them are sent meanwhile. The held points at the head
        of the queue are read once (``_held_scan``), not again every batch: a week of a sensor's
        seconds held took a second a batch to skip."""
        if not self._held_series:
            self._held_scan = None
            return self.outbox.peek(self.batch_size)
        held = frozenset(self._held_series)
        if self._held_scan is None or self._held_scan[0] != held:
            self._held_scan = (held, 0, ())
        _, after, probes = self._held_scan
        batch = list(probes)
        tried = {series_key(text) for _, text in probes}
        head = list(probes)  # the oldest of each held series among the held head of the queue
        resume = after  # the end of that head: no point but a held series' up to it
        in_head = True  # no point of another series read yet
        while len(batch) < self.batch_size:
            page = self.outbox.peek(self.batch_size, after=after)
            if not page:
                break
            for item in page:
                after = item[0]
                key = series_key(item[1])
                in_head = in_head and key in held
                if in_head:
                    resume = item[0]
                if key in held and key in tried:
                    continue  # waits, in order
                if key in held:
                    tried.add(key)
                    if in_head:
                        head.append(item)
                batch.append(item)
                if len(batch) == self.batch_size:
                    break
        self._held_scan = (held, resume, tuple(head))
        return batch

    def _recount(self) -> None:
        """After a cycle the outbox failed: count the points queued again. A store's write lock
        (a batch's ack refused) still lets the forwarder read (WAL); the count stays as last
        read if the outbox cannot be read either."""
        try:
            pending = self.outbox.pending()
        except sqlite3.Error:
            return
        with self._changed:
            self._stats = replace(self._stats, pending=pending)

    def _mark_down(self, error: InfluxWriteError, state: str) -> None:
        self._failures += 1
        with self._changed:
            self._stats = replace(
                self._stats, retries=self._stats.retries + 1, last_error=str(error), up=False, held=error.held
            )
        # One line per state change (up -> down, or another kind of failure), not per retry.
        if state == self._state:
            log.debug("InfluxDB write retry %d failed: %s", self._failures, error)
            return
        self._state = state
        level = logging.ERROR
        if state.startswith("internal"):
            said, level = f"Influx forwarder failed; retrying: {error}", 0  # logged with its traceback
        elif error.held:
            # A limit counted over points holds only the series it refuses (bisect_write).
            others = " (the points of other series are written meanwhile)" if error.smaller_may_fit else ""
            said = (
                f"InfluxDB refuses points for a state of its own, not for the points ({error.held}):"
                f" they stay queued and are retried until it takes them{others}: {error}"
            )
        elif error.status in (401, 403):
            said = f"InfluxDB refused our credentials; check the token/username; retrying: {error}"
        elif (error.status is not None and 300 <= error.status < 400) or state.startswith("refused alike"):
            said = str(error)  # the message says what to do; the points stay queued
        else:
            said = f"InfluxDB writes failing, points stay queued and are retried: {error}"
            level = logging.WARNING
        if level:
            log.log(level, "%s", said)
        self._changed_state(said)

    def _mark_up(self) -> None:
        if self._state != "up":
            log.info("InfluxDB writes resumed after %d failed attempt(s)", self._failures)
            self._state = "up"
            self._changed_state("")
        self._failures = 0
        with self._changed:
            if not self._stats.up:
                self._stats = replace(self._stats, up=True, held="")

    def _changed_state(self, said: str) -> None:
        """The state's line and when it began, for ``stats`` (and so for `minewatch status`)."""
        with self._changed:
            self._stats = replace(self._stats, state=one_line(said), since=datetime.now(UTC))


# --------------------------------------------------------------------------- reading back
# For evidence of a window the store has pruned (monitor/evidence/export.py).


# Each request's whole answer must arrive within timeout_s, so a long window is read a part at a
# time: six hours of one sensor's per-second points are 21,600 rows (about 4 MB of JSON).
READ_PART_US = 6 * 3600 * 1_000_000
READ_MAX_BODY = 64 * 1024 * 1024  # one part's answer, at most (v1)
# A part whose answer is larger (a sensor read many times a second) is read again as two halves,
# at most this many times over: six hours down to under six minutes, 64 times the rows.
READ_MAX_HALVINGS = 6


class _AnswerTooLarge(Exception):
    """A part's answer over READ_MAX_BODY: read again in halves (InfluxReader.rows)."""


Row: TypeAlias = tuple[int, dict[str, Any]]
# What reading a part may raise: no answer (_FOREIGN), or an answer that is no rows (ValueError).
_READ_FAILURES: tuple[type[BaseException], ...] = (*_FOREIGN, ValueError)


@dataclass(frozen=True)
class SeriesRead:
    """One read of InfluxDB: the ``fields`` of ``sensor``'s series of ``measurement`` at ``site``,
    over [start_us, end_us) (the reader's parts: ``part``)."""

    measurement: str
    site: str
    sensor: str
    start_us: int
    end_us: int
    fields: tuple[str, ...]

    def part(self, start_us: int, end_us: int) -> SeriesRead:
        return replace(self, start_us=start_us, end_us=end_us)


class InfluxReader:
    """Reads one series at a time back out of InfluxDB: v1 /query (InfluxQL), v2 Flux.

    A window is read in parts of ``READ_PART_US``; ``timeout_s`` bounds each part's whole request,
    the host name's lookup to the answer's last byte (v1 through deadline_http, v2 through the
    connections ``deadline_pool`` gives influxdb-client, as the writer's), so a server trickling
    its answer cannot hold an export. Neither follows a redirect: it would carry the credentials.
    """

    def __init__(self, config: InfluxConfig) -> None:
        self.config = config

    def rows(self, read: SeriesRead) -> Iterator[Row]:
        client: Any = None
        try:
            if self.config.version == 2:
                client = self._v2_client()
            # The parts still to read, the earliest last (popped first), each with its halvings.
            parts = [
                (part_start, min(part_start + READ_PART_US, read.end_us), 0)
                for part_start in range(read.start_us, read.end_us, READ_PART_US)
            ][::-1]
            while parts:
                part_start, part_end, halvings = parts.pop()
                each = read.part(part_start, part_end)
                try:
                    part = self._v1(each) if client is None else self._v2(client, each)
                except _AnswerTooLarge:
                    if halvings == READ_MAX_HALVINGS:
                        raise ValueError(
                            f"the answer for {(part_end - part_start) / 60e6:.1f} min is over"
                            f" {READ_MAX_BODY:,} bytes, after {halvings} halvings of the six-hour part"
                        ) from None
                    middle = (part_start + part_end) // 2
                    parts += [(middle, part_end, halvings + 1), (part_start, middle, halvings + 1)]
                    continue
                yield from part  # read whole first: the caller's time is not the request's
        except _READ_FAILURES as exc:
            reason = str(_translate(exc, self.config.url)) if isinstance(exc, _FOREIGN) else str(exc)
            where = f"{read.measurement} of {read.sensor!r} from InfluxDB at {self.config.url}"
            raise OutputError(
                f"cannot read {where}: {one_line(reason)}",
                retryable=True,
            ) from exc
        finally:
            if client is not None:
                client.close()

    def _v1(self, read: SeriesRead) -> list[Row]:
        def quote(text: str) -> str:
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

        source = f'"{read.measurement}"'
        if self.config.retention_policy:
            source = f'"{self.config.retention_policy}".{source}'
        query = (
            f"SELECT {', '.join(chr(34) + f + chr(34) for f in read.fields)} FROM {source}"
            f' WHERE "site" = {quote(read.site)} AND "sensor" = {quote(read.sensor)}'
            f" AND time >= {read.start_us * 1000} AND time < {read.end_us * 1000}"
        )
        params = {
            "db": self.config.database,
            "q": query,
            "epoch": "u",
            "chunked": "true",
            "chunk_size": "10000",
        }
        headers = {"User-Agent": _USER_AGENT, "Content-Type": "application/x-www-form-urlencoded"}
        if self.config.username:
            token = f"{self.config.username}:{self.config.password.value}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(token).decode("ascii")
        answer = deadline_http.post(
            f"{self.config.url.rstrip('/')}/query",
            urllib.parse.urlencode(params).encode(),
            headers,
            timeout_s=self.config.timeout_s,
            max_body=READ_MAX_BODY + 1,
        )
        if 300 <= answer.status < 400:
            raise ValueError(str(_redirect_error(self.config.url, answer.status, answer.header("Location"))))
        if answer.status != 200:
            raise ValueError(
                f"InfluxDB answered {answer.status}: {_error_message(answer.body, answer.reason)}"
            )
        if len(answer.body) > READ_MAX_BODY:
            raise _AnswerTooLarge
        rows: list[Row] = []
        # chunked=true: one JSON object per line, each holding part of the series
        for line in answer.body.splitlines():
            if not line.strip():
                continue
            chunk = json.loads(line)
            for result in chunk.get("results", []):
                if "error" in result:
                    raise ValueError(result["error"])
                for series in result.get("series", []):
                    columns = series["columns"]
                    for values in series["values"]:
                        row = dict(zip(columns, values, strict=True))
                        rows.append((int(row.pop("time")), {k: _read_value(k, v) for k, v in row.items()}))
        return rows

    def _v2_client(self) -> Any:
        from influxdb_client.client.influxdb_client import InfluxDBClient

        # retries=False (the default): no redirect is followed. Its timeout bounds each socket
        # read; the whole request is bounded by deadline_pool (_v2), as the writer's.
        client = InfluxDBClient(
            url=self.config.url,
            token=self.config.token.value,
            org=self.config.org,
            timeout=int(self.config.timeout_s * 1000),
        )
        deadline_pool.bound_requests(client.api_client.rest_client.pool_manager)
        return client

    def _v2(self, client: Any, read: SeriesRead) -> list[Row]:
        def flux_time(us: int) -> str:
            return from_us(us).isoformat().replace("+00:00", "Z")

        query = (
            f"from(bucket: {json.dumps(self.config.bucket)})"
            f" |> range(start: {flux_time(read.start_us)}, stop: {flux_time(read.end_us)})"
            f" |> filter(fn: (r) => r._measurement == {json.dumps(read.measurement)}"
            f" and r.site == {json.dumps(read.site)} and r.sensor == {json.dumps(read.sensor)})"
            ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
            ' |> sort(columns: ["_time"])'
        )
        with deadline_pool.one_deadline(self.config.timeout_s):
            return [
                (
                    to_us(record.values["_time"]),
                    {f: _read_value(f, record.values.get(f)) for f in read.fields},
                )
                for record in client.query_api().query_stream(query)
            ]


def _read_value(name: str, value: Any) -> Any:
    # InfluxDB's JSON writes 55.0 as 55; the schema's numeric fields are floats.
    if isinstance(value, int) and not isinstance(value, bool) and name != "late":
        return float(value)
    return value
