"""What an evidence bundle discloses: the configuration by allow-list, records by reader and window.

A bundle leaves the operator's machine (an inspector downloads it, a court reads it), so what it
shows in clear is decided here, field by field and kind by kind, never by what to leave out:

- the configuration: ``monitor.journal.config_record.site_config_text``, the text the daemon
  chains at start-up (an allow-list of the exported site's settings), so verify proves it.
- ``Disclosure``: the records a reader may see (their kinds, the alerts' audiences); a record
  outside the exported window or not for the reader is carried in ``chain.csv`` as its digest
  alone, so the chain still recomputes from anchor to anchor.
- ``TimeScope``: a time-scoped reader's allow-list for findings and what is made of them (notices'
  episodes, notices, alerts): the one check the portal's findings, day view and bundles use.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.evidence.format import RECORD_KINDS
from monitor.journal import queries
from monitor.wire.canonical import to_us

# Every audience an alert may have but the operator's own: what the Town and its inspectors see
# (the portal's inspector and Town pages show alerts addressed to the town).
READER_AUDIENCES = frozenset({"town", "inspector"})


@dataclass(frozen=True, slots=True)
class Disclosure:
    """The records a bundle shows in clear, inside its window: the reader's view.

    ``kinds``: record kinds (``monitor.evidence.format.RECORD_KINDS``) the reader may see;
    ``audiences``: an alert is shown when one of its audiences is among these. Everything else
    in the chain segment, and every record outside the window, is carried as its digest alone.
    The default is the Town's and its inspectors' view (``minewatch evidence``, the portal).
    """

    kinds: frozenset[str] = frozenset(RECORD_KINDS)
    audiences: frozenset[str] = READER_AUDIENCES
    # A time-scoped reader (a portal inspector with not_before/not_after): the records that tell
    # findings are shown only when all they report lies in the scope (TimeScope.shows).
    time_scope: TimeScope | None = None

    def manifest(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"kinds": sorted(self.kinds), "alert_audiences": sorted(self.audiences)}
        if self.time_scope is not None:
            shown["time_scope"] = self.time_scope.manifest()
        return shown


TOWN_VIEW = Disclosure()


# --------------------------------------------------------------------------- a reader's time scope

# The times a record reports in its own columns, per kind whose records tell findings; their texts
# (data, message, note) are read for every time they name (TimeScope.shows). Storage metadata
# (created_us, recorded_us, received_us) is when the record was written, not what it reports.
SCOPED_RECORDS: dict[str, tuple[str, ...]] = {
    # An event (declared work, a truck, a blast, temporary lighting) that began before the scope
    # or ends after it tells what happened outside: overlapping is not enough here either.
    "event": ("ts_us", "end_us"),
    "finding": ("start_us", "end_us"),
    "notice_episode": ("start_us", "end_us"),
    "notice": ("opened_us",),
    "notice_change": ("at_us",),
    "alert": ("created_us",),
}
_TEXTS = ("data", "message", "note", "finding_ids")
# Times a record sets rather than reports, by kind: top-level members of its JSON text. A cure
# deadline is counted when a notice is issued or extended, from the profile's rule (13.3.A), so
# naming it tells nothing that happened after the record's own time, which the scope does check.
# Left in, every notice issued within the cure period of the scope's end would be withheld while
# its "opened" change, which names the same deadline in local time, is shown.
SET_TIMES: dict[str, frozenset[str]] = {
    "notice": frozenset({"deadline", "deadline_local"}),
    "notice_change": frozenset({"previous_deadline", "new_deadline"}),
    "alert": frozenset({"deadline", "deadline_local"}),  # a notice's change as an alert
}
# A time named in a text: RFC 3339 with its offset (a reading's ref "sound:n1:2026-...Z" too) ...
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)")
# ... or a JSON member in microseconds ("window_start_us": 1796..., "ts_us": ...).
_US = re.compile(r'"[A-Za-z0-9_]*_us"\s*:\s*(-?\d+)')


@dataclass(frozen=True, slots=True)
class TimeScope:
    """A reader's time scope [not_before, not_after] (µs UTC; None: open on that side), by allow-list.

    An event, a finding, or a record made of findings (a notice's episode, a notice, its changes,
    an alert) is shown only when everything it reports lies in the scope: its own times (an
    event's or a finding's start and end), every time its texts name (the evaluation window
    ``window_start``/``window_end``, the readings of its refs, local and UTC stamps), the events
    its refs name (a truck, a blast, declared work) and, for an episode, every finding it is made
    of. Overlapping the scope is not enough: a finding that starts inside it and ends after it
    tells what lies outside. A cure deadline is not reported but set (SET_TIMES): a notice issued,
    or extended, inside the scope is shown though its deadline lies after it.
    """

    not_before_us: int | None = None
    not_after_us: int | None = None

    @classmethod
    def of(cls, not_before: datetime | None, not_after: datetime | None) -> TimeScope | None:
        """The scope of an account's not_before/not_after (None: an unscoped reader)."""
        if not_before is None and not_after is None:
            return None
        return cls(
            to_us(not_before) if not_before is not None else None,
            to_us(not_after) if not_after is not None else None,
        )

    def holds(self, ts_us: int) -> bool:
        return (self.not_before_us is None or ts_us >= self.not_before_us) and (
            self.not_after_us is None or ts_us <= self.not_after_us
        )

    def manifest(self) -> dict[str, Any]:
        return {
            "not_before_us": self.not_before_us,
            "not_after_us": self.not_after_us,
            "rule": "events, findings, notices' episodes, notices, their changes and alerts only when"
            " every time they report lies in the scope (a cure deadline a notice sets is not a time it"
            " reports); the others are in chain.csv as their digests alone",
        }

    def shows(
        self, conn: sqlite3.Connection, site: str, kind: str, row: Mapping[str, Any] | sqlite3.Row
    ) -> bool:
        """Whether a stored row of ``kind`` (a key of SCOPED_RECORDS; others: True) is shown."""
        columns = SCOPED_RECORDS.get(kind)
        if columns is None:
            return True
        if not all(row[c] is None or self.holds(int(row[c])) for c in columns):
            return False
        names = set(row.keys())  # a sqlite3.Row's `in` looks at its values, not its names
        texts = [_reported(kind, str(row[c])) for c in _TEXTS if c in names and row[c] is not None]
        if not all(self.holds(t) for t in _named_times(texts)):
            return False
        if not all(self.holds(t) for t in _event_times(conn, site, texts)):
            return False
        if "finding_ids" in names and row["finding_ids"]:
            made_of = _findings(conn, site, row["finding_ids"])
            return all(self.shows(conn, site, "finding", f) for f in made_of)
        return True


def _reported(kind: str, text: str) -> str:
    """``text`` without the members naming times a record of ``kind`` sets (SET_TIMES)."""
    names = SET_TIMES.get(kind)
    if names is None or not any(f'"{name}"' in text for name in names):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return text
    return json.dumps({k: v for k, v in value.items() if k not in names})


def _named_times(texts: Iterable[str]) -> Iterable[int]:
    for text in texts:
        for stamp in _STAMP.findall(text):
            try:
                yield to_us(datetime.fromisoformat(stamp.replace(" ", "T").replace("Z", "+00:00")))
            except ValueError:
                continue
        for value in _US.findall(text):
            yield int(value)


def _refs(texts: Iterable[str]) -> Iterable[str]:
    """The refs ("truck:t-17", "blast:B-7", "work:w-1") a record's JSON texts list."""
    for text in texts:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
                refs = item.get("refs")
                if isinstance(refs, list):
                    yield from (r for r in refs if isinstance(r, str))
            elif isinstance(item, list):
                stack.extend(item)


def _event_times(conn: sqlite3.Connection, site: str, texts: Iterable[str]) -> Iterable[int]:
    """The times of the events a record's refs name (a ref with a stamp of its own is read as text)."""
    for ref in _refs(texts):
        prefix, _, name = ref.partition(":")
        if not name or _STAMP.search(ref):
            continue
        times = queries.event_times(conn, site, name)
        if not times and prefix == "blast":
            times = queries.blast_times(conn, site, name)
        for ts_us, end_us in times:
            yield ts_us
            if end_us is not None:
                yield end_us


def _findings(conn: sqlite3.Connection, site: str, ids_json: str) -> list[sqlite3.Row]:
    """Every stored revision of the findings a JSON list of ids names (an episode's)."""
    try:
        ids = [str(i) for i in json.loads(ids_json)]
    except (ValueError, TypeError):
        return []
    return queries.finding_revisions(conn, site, ids)
