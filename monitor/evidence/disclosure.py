"""What an evidence bundle discloses: the configuration by allow-list, records by reader and window.

A bundle leaves the operator's machine (an inspector downloads it, a court reads it), so what it
shows in clear is decided here, field by field and kind by kind, never by what to leave out:

- the configuration: ``monitor.journal.config_record.site_config_text``, the text the daemon
  chains at start-up (an allow-list of the exported site's settings), so verify proves it.
- ``Disclosure``: the records a reader may see (their kinds, the alerts' audiences, and for every
  reader but the operator the members of an alert's data, READER_ALERT_DATA); a record outside
  the exported window or not for the reader is carried in ``chain.csv`` as its digest alone, so
  the chain still recomputes from anchor to anchor.
- ``TimeScope``: a time-scoped reader's allow-list for findings and what is made of them (notices'
  episodes, notices, alerts): the one check the portal's findings, day view and bundles use; and
  for the chain heads published to the Town (``TimeScope.anchors``), which tell how long the chain
  was, its head and when: those a bundle's anchors.json lists and a verify against them uses.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any, TypeVar

from monitor.evidence.format import RECORD_KINDS
from monitor.journal import queries
from monitor.times import MICROSECOND
from monitor.wire.canonical import to_us
from rules.deadlines import end_of_local_day

# The operator's audience: a reader whose audiences name it is the operator, who sees its own
# alerts whole (an alert's data included: READER_ALERT_DATA holds for every other reader).
OPERATOR = "operator"
# Every audience an alert may have but the operator's own: what the Town and its inspectors see
# (the portal's inspector and Town pages show alerts addressed to the town).
READER_AUDIENCES = frozenset({"town", "inspector"})
A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class Disclosure:
    """The records a bundle shows in clear, inside its window: the reader's view.

    ``kinds``: record kinds (``monitor.evidence.format.RECORD_KINDS``) the reader may see;
    ``audiences``: an alert is shown when one of its audiences is among these, and, unless they
    name the operator (OPERATOR), while its data holds only what READER_ALERT_DATA names.
    Everything else in the chain segment, and every record outside the window, is carried as its
    digest alone.
    The default is the Town's and its inspectors' view (``minewatch evidence``, the portal).
    """

    kinds: frozenset[str] = frozenset(RECORD_KINDS)
    audiences: frozenset[str] = READER_AUDIENCES
    # A time-scoped reader (a portal inspector with not_before/not_after): the records that tell
    # findings are shown only when all they report lies in the scope (TimeScope.shows).
    time_scope: TimeScope | None = None

    def judges(self, kind: str) -> bool:
        """Whether the rows of ``kind`` its kinds and audiences show are each judged by ``shows``."""
        return (kind == "alert" and OPERATOR not in self.audiences) or (
            self.time_scope is not None and self.time_scope.judges(kind)
        )

    def shows(
        self,
        conn: sqlite3.Connection,
        site: str,
        kind: str,
        row: Mapping[str, Any] | sqlite3.Row,
        zone: tzinfo,
    ) -> bool:
        """Whether a stored row of ``kind`` that the kinds and audiences show is in clear: for a
        reader who is not the operator, an alert only while its data holds what READER_ALERT_DATA
        names; for a time-scoped reader, what ``TimeScope.shows``. Every other row: True."""
        if kind == "alert" and OPERATOR not in self.audiences and not alert_data_for_readers(row):
            return False
        return self.time_scope is None or self.time_scope.shows(conn, site, kind, row, zone)

    def manifest(self) -> dict[str, Any]:
        kinds = self.kinds if self.time_scope is None else self.kinds - NOT_FOR_SCOPED
        shown: dict[str, Any] = {"kinds": sorted(kinds), "alert_audiences": sorted(self.audiences)}
        if self.time_scope is not None:
            shown["time_scope"] = self.time_scope.manifest()
        return shown


TOWN_VIEW = Disclosure()


# --------------------------------------------------------------------------- a reader's time scope

# The times a record reports in its own columns, per kind whose records tell findings; their texts
# (data, message, note) are read for every time they name (TimeScope.shows). Storage metadata
# (created_us, recorded_us, a reading's received_us) is when the record was written, not what it
# reports; a complaint's received_us is when the resident complained, which it does report.
SCOPED_RECORDS: dict[str, tuple[str, ...]] = {
    # An event (declared work, a truck, a blast, temporary lighting) that began before the scope
    # or ends after it tells what happened outside: overlapping is not enough here either.
    "event": ("ts_us", "end_us"),
    "finding": ("start_us", "end_us"),
    "notice_episode": ("start_us", "end_us"),
    "notice": ("opened_us",),
    "notice_change": ("at_us",),
    "alert": ("created_us",),
    # A complaint about the scope's hours received after it tells what came after, and so does
    # a change of it (the Town's triage) naming a later time.
    "complaint": ("received_us", "start_us", "end_us"),
    "complaint_change": ("at_us",),
}
# Kinds a time-scoped reader never sees, because each record holds what is not the reader's and
# its digest covers the whole record, so no part of one can be shown and still verify: a portal
# action names an account and the address it acted from (the Town's record of who did what; an
# inspector's own actions are no exception); a compliance report's record names its recipients,
# the people it was delivered to (delivery data, not a finding; a report made and not sent names
# none, and showing that would tell that it was not sent).
NOT_FOR_SCOPED: frozenset[str] = frozenset({"portal_action", "report"})
# An alert's data members every reader but the operator (the Town, its inspectors, scoped or not)
# may see, by the alert's kind, for kinds whose data may hold what is not the reader's. An alert of
# such a kind whose data has any other member is carried as its digest alone (the digest covers
# the whole record, so no member can be left out). A report alert (monitor/reports/sending.py)
# names its report, period, the chain head its figures were computed from and its files' SHA-256;
# one a store wrote before also named where the files lie on the operator's disk (report_pdf,
# report_csv), which is not the reader's: the Town was sent them then, by an earlier minewatch,
# and a bundle, which goes on to courts and inspectors, does not carry them on.
READER_ALERT_DATA: dict[str, frozenset[str]] = {
    "report": frozenset(
        {
            "report_id",
            "period",
            "from",
            "to",
            "chain_seq",
            "chain_head",
            "report_pdf_sha256",
            "report_csv_sha256",
            "made_local",
        }
    ),
}
_TEXTS = ("data", "message", "note", "finding_ids")
# Times a record sets rather than reports, by kind: top-level members of its JSON text. A cure
# deadline is counted when a notice is issued or extended, from the profile's rule (13.3.A), so
# naming it tells nothing that happened after the record's own time, which the scope does check.
# Left in, every notice issued within the cure period of the scope's end would be withheld while
# its "opened" change, which names the same deadline in local time, is shown.
# A cure reminder's change ("deadline_near", "deadline_passed") names as "deadline" the one its
# notice already has, as an extension names its previous_deadline: the change is made at its own
# time, which the scope holds, about a deadline the notice set. Held to the scope, it hid every
# reminder made before a deadline that lies after the scope's end. A service's change names the
# deadline counted from the service ("counted_deadline"), which the rule sets as it does at issue.
SET_TIMES: dict[str, frozenset[str]] = {
    "notice": frozenset({"deadline", "deadline_local"}),
    "notice_change": frozenset({"previous_deadline", "new_deadline", "deadline", "counted_deadline"}),
    "alert": frozenset({"deadline", "deadline_local"}),  # a notice's change as an alert
}
# Columns holding a time a record of the kind sets (its cure deadline): a text naming the same
# moment in site time ("correct by 2026-06-29 23:59 CDT", the "opened" change's note) names it.
SET_COLUMNS: dict[str, tuple[str, ...]] = {
    "notice": ("first_deadline_us", "deadline_us"),
    "notice_change": ("deadline_us",),
}
# A time named in a text: RFC 3339 with its offset (a reading's ref "sound:n1:2026-...Z" too) ...
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)")
# ... or a JSON member in microseconds ("window_start_us": 1796..., "ts_us": ...).
_US = re.compile(r'"[A-Za-z0-9_]*_us"\s*:\s*(-?\d+)')
# ... or site time, as the rules and notices write it for people (rules/times.py): a date with
# a clock and its zone's abbreviation ("2026-07-01 16:05 CDT", local_stamp, span_text), a clock
# alone ("16:05", "16:05:00 CDT", "at 4:05 pm", local_hm, the hours "06:00-19:00") or a date
# alone ("on 2026-07-01", local_date). Read after the stamps above, in what they left.
_LOCAL = re.compile(
    r"(?<![\d.])(\d{4})-(\d\d)-(\d\d)"
    r"(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?(?:\s+([A-Z]{2,5})\b)?)?(?![\d:])"
)
_CLOCK = re.compile(
    r"(?<![\d:.])(\d{1,2})(?::(\d\d)(?::(\d\d)(?:\.\d+)?)?)?(?![\d:])"
    r"(?:\s*(?i:([ap])\.?m\b\.?))?(?:\s+([A-Z]{2,5})\b)?"
)
# Time-like words these cannot place (a person's note: "7/1/2026", "2026-7-1", "July 1"): a
# record naming one is not shown to a scoped reader (allow-list: what cannot be placed is out).
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_UNPLACED = re.compile(
    rf"\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b\d{{4}}[-/]\d{{1,2}}[-/]\d{{1,2}}\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?![a-z])",
    re.IGNORECASE,
)
# Days and times named relative to when something was written ("yesterday", "last night", "this
# morning", "next Tuesday", "the day before", "overnight", "Sat 14:00", "two days ago"): none can be
# placed from the text alone, so a record naming one is not shown to a scoped reader either.
_WEEKDAY = (
    r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)\b\.?"
)
_WEEKDAY_NAME = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
_DAY_PART = r"(?:morning|afternoon|evening|night)\b"
_RELATIVE = re.compile(
    # days and nights counted from the text's own: "tonight", "overnight" (the night it was written
    # or the one before), "two days ago"
    r"\b(?:yesterday|today|tonight|tomorrow|overnight|ago)\b"
    rf"|\b(?:last|this|next|past|previous|coming)\s+(?:{_DAY_PART}|week(?:end)?\b)"
    r"|\b(?:last|next|past|previous|coming)\s+(?:month|year)\b"
    # counted from a day the text does not date: "the day before", "the next morning"
    rf"|\bthe\s+(?:day|{_DAY_PART})\s+(?:before|after)\b"
    rf"|\bthe\s+(?:previous|next|following)\s+(?:day\b|{_DAY_PART})"
    # midnight lies between two days and says neither (noon is read as the clock 12:00, _NOON)
    r"|\bmidnight\b"
    # a weekday by its whole name is a day of some week: "the blast Tuesday", "came Sunday",
    # "Tuesday's", "Tuesday morning" (one the rules name is read out first, _AS_A_RULE, and one
    # repeating the date beside it with it, _dated_weekday; a plural, "Sundays", is no one day) ...
    rf"|\b{_WEEKDAY_NAME}"
    # ... and by its abbreviation where that names a day, not a word ("sat idle in the sun"):
    # after last/next/on/since, or before a day or a time ("Sat 14:00", "Sat. 7")
    rf"|\b(?:last|this|next|past|previous|coming|on|since|until|till)\s+{_WEEKDAY}"
    r"|\b(?-i:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b\.?,?\s+(?:at\s+)?\d",
    re.IGNORECASE,
)
# What the rules and the profiles write as a rule, naming no one day or time, read out of a text
# before _RELATIVE; each is from a finding's or a notice's generated text (the tests list them).
_AS_A_RULE = re.compile(
    # a setting's list of days, each a JSON string of its own: a notice's "cure_closed_days":
    # ["sunday"], a profile's weekend or hours_exclude
    rf'"{_WEEKDAY_NAME}"'
    # any day of a kind: "a Sunday or legal holiday", "a Saturday, Sunday or legal holiday" (a
    # notice's deadline_rule), "every Sunday"
    rf"|\b(?:an?|every|each|any)\s+{_WEEKDAY_NAME}(?:(?:,|\s+or|\s+and)\s+{_WEEKDAY_NAME})*"
    # the days a count leaves out: "the days of sunday, wisconsin" (6.F's notice, hours_exclude),
    # "closed days: sunday"
    rf"|\bdays(?:\s+of|:)\s+{_WEEKDAY_NAME}(?:,\s+{_WEEKDAY_NAME})*"
    # counting whole days: "midnight to midnight" (6.F's notice), "an overnight use" and "switched off
    # briefly at midnight" (6.C.6's temporary lighting), "from the next day on" (the lighting rules)
    r"|\bmidnight\s+to\s+midnight\b|\ban\s+overnight\s+use\b|\bbriefly\s+at\s+midnight\b"
    r"|\bfrom\s+the\s+next\s+day\s+on\b"
    # the blasting hours' sunset (6.F): "(midnight sun)", "runs to local midnight", "even when it
    # falls after midnight", "a blast after midnight but before that sunset is judged under the
    # previous day's exception", a verdict's "before midnight on a day the sun does not set"
    r"|\bmidnight\s+sun\b|\blocal\s+midnight\b|\bfalls\s+after\s+midnight\b"
    r"|\ba\s+blast\s+after\s+midnight\s+but\s+before\s+that\s+sunset\b"
    r"|\bthe\s+previous\s+day(?:['\u2019]|\\u2019)s\s+exception\b|\bbefore\s+midnight\s+on\s+a\s+day\b"
    # the day of a deadline a cure reminder sets and names, its stamp read first: "the cure
    # deadline is 2026-07-21 23:59 CDT, tomorrow" (the reminder's change to the notice)
    r"|\bthe\s+cure\s+deadline\s+is\s+,\s+(?:today|tomorrow)\b",
    re.IGNORECASE,
)
# Noon is the clock 12:00, read as that clock is ("at noon": on the record's own days).
_NOON = re.compile(r"\b(?:noon|midday)\b", re.IGNORECASE)
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
# A weekday just before a date ("on Tuesday 2026-07-07", "Tue, 2026-07-07"): it repeats the date
# when it is the date's own, and is read with it (_dated_weekday).
_WEEKDAY_BEFORE = re.compile(rf"\b({_WEEKDAY}),?\s+$", re.IGNORECASE)
# The stored kind of the event a ref names, by the ref's prefix. A blast's notice has the blast's
# id ("blast:B-7" is the blast, "notice:B-7" its notice): read as any kind, a notice given after
# the scope withheld every finding about a blast inside it (its window, its vibration). A prefix
# not listed names events of every kind.
REF_EVENT_KINDS: dict[str, str] = {
    "blast": "blast",
    "notice": "blast-notice",
    "truck": "truck",
    "work": "work",
}
_UTC_NAMES = frozenset({"UTC", "GMT", "Z"})
_SECOND_US = 1_000_000


@dataclass(frozen=True, slots=True)
class TimeScope:
    """A reader's time scope [not_before, not_after] (µs UTC; None: open on that side), by allow-list.

    An event, a finding, or a record made of findings (a notice's episode, a notice, its changes,
    an alert) is shown only when everything it reports lies in the scope: its own times (an
    event's or a finding's start and end), every time its texts name (the evaluation window
    ``window_start``/``window_end``, the readings of its refs, local and UTC stamps), the events
    its refs name (a truck, a blast, declared work; each of the kind its ref names,
    REF_EVENT_KINDS) and, for an episode, every finding it is made of. Overlapping the scope is
    not enough: a finding that starts inside it and ends after it tells what lies outside. A cure
    deadline is not reported but set (SET_TIMES, SET_COLUMNS): a notice issued, or extended,
    inside the scope is shown though its deadline lies after it; so are the day, the hours and the
    sunset a verdict on one event names (``event_verdicts``: the blasting-hours verdict), shown
    when the event it judges is.
    Times named in site time ("2026-07-01 16:05 CDT", "16:05", "at 4:05 pm", "on 2026-07-01") are
    placed in the site's zone (``_site_times``); a time-like word that cannot be placed ("July 1",
    "7/1/2026", another zone's abbreviation, a day named relative to the text: "yesterday", "last
    night", "next Tuesday", "the blast Sunday", "overnight", _RELATIVE) keeps the record out; what
    the rules write as a rule ("a Sunday or legal holiday", "midnight sun", _AS_A_RULE) does not.
    """

    not_before_us: int | None = None
    not_after_us: int | None = None
    # The site's findings that are a verdict on one event: (the finding's ``standard``, the kind
    # of event judged, named by the finding's one ref, REF_EVENT_KINDS), as the site's profile
    # gives them (rules.profile.Profile.event_verdicts: its rule says so, whatever the profile
    # names the standard). The blasting-hours verdict (6.F) judges the blast by its own time and
    # names the blast's day, the allowed hours ("10:00-15:00") and that day's sunset: times its
    # rule and the sun set for the blast's day (the day before too: a blast after midnight may be
    # judged under the previous afternoon's exception), not times it reports. Read as reported,
    # they kept the verdict from a reader whose scope holds the blast but not its whole day. A
    # standard not listed keeps every time it names held to the scope. A set of pairs, not a
    # mapping: a scope is a key of the portal's caches.
    event_verdicts: frozenset[tuple[str, str]] = frozenset()
    # The same pairs as a mapping, made once per scope (``shows`` looks a finding's standard up
    # in it for every record it checks); no part of the scope's equality or hash.
    _verdict_on: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_verdict_on", dict(self.event_verdicts))

    @classmethod
    def of(
        cls, not_before: datetime | None, not_after: datetime | None, event_verdicts: Mapping[str, str]
    ) -> TimeScope | None:
        """The scope of an account's not_before/not_after (None: an unscoped reader) over a site
        whose profile gives ``event_verdicts`` (Profile.event_verdicts)."""
        if not_before is None and not_after is None:
            return None
        return cls(
            to_us(not_before) if not_before is not None else None,
            to_us(not_after) if not_after is not None else None,
            frozenset(event_verdicts.items()),
        )

    def holds(self, ts_us: int) -> bool:
        """Both ends held: the portal's views cut to the same scope (times.scope_window)."""
        return (self.not_before_us is None or ts_us >= self.not_before_us) and (
            self.not_after_us is None or ts_us <= self.not_after_us
        )

    def anchors(self, anchors: Sequence[A], published_us: Callable[[A], int]) -> list[A]:
        """The chain heads (``anchors``, in seq order) this reader may see and verify against:
        those published within the scope, and the first one published after its end, the head a
        bundle of the scope's last minutes ends its segment at (without it they are proven by
        nothing). Nothing of a later head (its seq, the chain's length then, its head, its time)
        is the reader's. None is needed from before the scope: a chain that reaches a held head
        proves every entry before it."""
        end = self.not_after_us
        closing = next((i for i, a in enumerate(anchors) if end is not None and published_us(a) > end), None)
        return [a for i, a in enumerate(anchors) if i == closing or self.holds(published_us(a))]

    def manifest(self) -> dict[str, Any]:
        return {
            "not_before_us": self.not_before_us,
            "not_after_us": self.not_after_us,
            "rule": "events, findings, notices' episodes, notices, their changes, alerts, complaints and"
            " their changes only when every time they report lies in the scope, their texts' site times"
            " included (a cure deadline a notice sets is not a time it reports, nor are the day, hours"
            " and sunset a blasting-hours verdict names for the blast it judges, shown with the blast;"
            " a time-like word that"
            " cannot be placed keeps the record out), a notice's episode only with its notice;"
            " portal actions never (each names an account and its address), nor compliance reports"
            " (each names the people it was delivered to), nor a report's alert naming more than its"
            " report, period, chain head and files' SHA-256 (an earlier one named the files' paths);"
            " the others are in"
            " chain.csv as their digests alone, and so are sound, readings and audio outside the"
            " window and config entries chained after it (but the one config.toml and the profile"
            " are), none naming its kind (seq,,,digest,; digest_only counts them as 'kind not"
            " stated'); anchors.json lists the chain heads published within the scope and the first"
            " after it",
        }

    def judges(self, kind: str) -> bool:
        """Whether records of ``kind`` are held to the scope (``shows``); others are all shown."""
        return kind in SCOPED_RECORDS or kind in NOT_FOR_SCOPED

    def shows(
        self,
        conn: sqlite3.Connection,
        site: str,
        kind: str,
        row: Mapping[str, Any] | sqlite3.Row,
        zone: tzinfo,
    ) -> bool:
        """Whether a stored row of ``kind`` (a key of SCOPED_RECORDS; NOT_FOR_SCOPED: False;
        others: True) is shown.

        ``zone``: the site's time zone, in which its texts name times for people (site time).
        """
        if kind in NOT_FOR_SCOPED:
            return False
        if kind == "alert" and not alert_data_for_readers(row):  # a scoped reader is never the operator
            return False
        columns = SCOPED_RECORDS.get(kind)
        if columns is None:
            return True
        own = [int(row[c]) for c in columns if row[c] is not None]
        if not all(self.holds(t) for t in own):
            return False
        names = set(row.keys())  # a sqlite3.Row's `in` looks at its values, not its names
        texts = [_reported(kind, str(row[c])) for c in _TEXTS if c in names and row[c] is not None]
        judged = self._judged_days(conn, site, kind, row, zone)

        def set_by_its_rule(lo: int, hi: int) -> bool:
            return judged is not None and judged[0] <= lo and hi <= judged[1]

        if not all(self.holds(t) or set_by_its_rule(t, t) for t in _named_times(texts)):
            return False
        sets = _set_times(kind, row, names)
        days = _local_days(own, zone)
        for text in texts:
            spans = _site_times(text, zone, days)
            if spans is None:  # a time-like word that cannot be placed: not shown
                return False
            if not all(
                self.covers(lo, hi) or any(lo <= t <= hi for t in sets) or set_by_its_rule(lo, hi)
                for lo, hi in spans
            ):
                return False
        if not all(self.holds(t) for t in _event_times(conn, site, texts)):
            return False
        if kind == "notice_episode" and not self.shows_notice(conn, site, str(row["notice_id"]), zone):
            return False
        if "finding_ids" in names and row["finding_ids"]:
            made_of = _findings(conn, site, row["finding_ids"])
            return all(self.shows(conn, site, "finding", f, zone) for f in made_of)
        return True

    def _judged_days(
        self,
        conn: sqlite3.Connection,
        site: str,
        kind: str,
        row: Mapping[str, Any] | sqlite3.Row,
        zone: tzinfo,
    ) -> tuple[int, int] | None:
        """For a verdict on one event (``event_verdicts``) whose event record this reader is shown
        (``shows``: its times and its texts, a blast's safety reason among them): [lo, hi] (µs
        UTC), the site days its rule reads, the event's and the one before, where the times it
        names are set by the rule, not reported. None for every other record: its times count."""
        if kind != "finding" or not row["data"]:
            return None
        try:
            value = json.loads(str(row["data"]))
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        judged_kind = self._verdict_on.get(str(value.get("standard")))
        refs = value.get("refs")
        if judged_kind is None or not isinstance(refs, list) or len(refs) != 1:
            return None
        prefix, _, name = str(refs[0]).partition(":")
        if REF_EVENT_KINDS.get(prefix) != judged_kind or not name:
            return None
        events = queries.event_rows(conn, site, judged_kind, name)
        if not events or not all(self.shows(conn, site, "event", e, zone) for e in events):
            return None
        times = [int(e[c]) for e in events for c in ("ts_us", "end_us") if e[c] is not None]
        days = _local_days(times, zone)
        first, after = days[0] - timedelta(days=1), days[-1] + timedelta(days=1)
        start = to_us(datetime.combine(first, time(0), zone))
        return start, to_us(datetime.combine(after, time(0), zone)) - 1

    def covers(self, lo_us: int, hi_us: int) -> bool:
        """Whether all of [lo_us, hi_us] lies in the scope (a time named to the minute is a minute)."""
        return self.holds(lo_us) and self.holds(hi_us)

    def shows_notice(self, conn: sqlite3.Connection, site: str, notice_id: str, zone: tzinfo) -> bool:
        """Whether the notice is shown (its record, as ``shows``): naming it, as an episode's
        notice does (a bundle's notice_episodes, the portal's day view), tells that it was
        issued, which for an episode at the scope's end is often just after it."""
        row = queries.notice_row(conn, site, notice_id)
        return row is not None and self.shows(conn, site, "notice", row, zone)


def alert_data_for_readers(row: Mapping[str, Any] | sqlite3.Row) -> bool:
    """Whether an alert's data holds only members a reader other than the operator may see
    (READER_ALERT_DATA; an alert of a kind it does not name: True)."""
    allowed = READER_ALERT_DATA.get(str(row["kind"]))
    if allowed is None:
        return True
    try:
        data = json.loads(str(row["data"]))
    except ValueError:
        return False
    return isinstance(data, dict) and set(data) <= allowed


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


def _set_times(kind: str, row: Mapping[str, Any] | sqlite3.Row, names: set[str]) -> list[int]:
    """The times a record of ``kind`` sets (SET_COLUMNS, SET_TIMES): a text may name them."""
    times = [int(row[c]) for c in SET_COLUMNS.get(kind, ()) if c in names and row[c] is not None]
    members = SET_TIMES.get(kind)
    if members and "data" in names and row["data"]:
        try:
            value = json.loads(str(row["data"]))
        except ValueError:
            value = None
        if isinstance(value, dict):
            times.extend(_named_times(str(value[m]) for m in members if m in value))
    return times


def _local_days(times: Iterable[int], zone: tzinfo) -> list[date]:
    """The site's days from the first to the last of ``times``: where a clock alone may lie."""
    stamps = sorted(times)
    if not stamps:
        return []
    first = datetime.fromtimestamp(stamps[0] / _SECOND_US, zone).date()
    last = datetime.fromtimestamp(stamps[-1] / _SECOND_US, zone).date()
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _site_times(text: str, zone: tzinfo, days: Sequence[date]) -> list[tuple[int, int]] | None:
    """Every span [lo, hi] (µs UTC) a time ``text`` names in site time could be, or None when it
    names one that cannot be placed (_UNPLACED, _RELATIVE; what _AS_A_RULE reads names none).

    A date with a clock is placed in ``zone``, at both readings of a clock the zone repeats unless
    the zone's abbreviation picks one ("01:30 CDT"); one naming another zone cannot be placed. A
    clock alone ("noon" too) lies on each day the text names, or else each of ``days`` (the
    record's own). A date alone is its whole day, read with its own weekday before it; a clock to
    the minute its whole minute. RFC 3339 stamps (read by _named_times) are left out first.
    """
    rest = _STAMP.sub(" ", text)
    spans: list[tuple[int, int]] = []
    named_days: list[date] = []
    read: list[tuple[int, int]] = []  # where each date (and a weekday repeating it) is
    for m in _LOCAL.finditer(rest):
        try:
            day = date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        read.append((_dated_weekday(rest, m.start(), day), m.end()))
        if m[4] is None:
            named_days.append(day)
            start = to_us(datetime.combine(day, time(0), zone))
            spans.append((start, to_us(end_of_local_day(day, zone, MICROSECOND))))
            continue
        placed = _wall_spans(day, int(m[4]), int(m[5]), m[6], m[7], zone)
        if placed is None:
            return None
        spans.extend(placed)
    for start, end in reversed(read):
        rest = f"{rest[:start]} {rest[end:]}"
    # Read once the dates placed above are out of the text: _UNPLACED would take them too.
    rest = _AS_A_RULE.sub(" ", rest)
    if _UNPLACED.search(rest) or _RELATIVE.search(rest):
        return None
    rest = _NOON.sub("12:00", rest)
    for m in _CLOCK.finditer(rest):
        if m[2] is None and m[4] is None:
            continue  # a number, not a clock
        hour = int(m[1])
        if m[4] is not None:  # 12-hour: 12 am is midnight, 12 pm noon
            if not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if m[4].lower() == "p" else 0)
        on = named_days or days
        if not on:
            return None
        for day in on:
            placed = _wall_spans(day, hour, int(m[2] or 0), m[3], m[5], zone)
            if placed is None:
                return None
            spans.extend(placed)
    return spans


def _dated_weekday(text: str, start: int, day: date) -> int:
    """Where the date at ``start`` in ``text`` begins, with the weekday just before it when that
    weekday is the date's own ("Tuesday 2026-07-07"): it names no other day. Another weekday
    ("Monday 2026-07-07") is left in the text, a day it does not place."""
    before = _WEEKDAY_BEFORE.search(text, 0, start)
    if before is None or _WEEKDAYS.index(before[1][:3].lower()) != day.weekday():
        return start
    return before.start()


def _wall_spans(
    day: date, hour: int, minute: int, second: str | None, abbreviation: str | None, zone: tzinfo
) -> list[tuple[int, int]] | None:
    """The spans a site clock on ``day`` names: its minute (its second, when given), at each
    reading the abbreviation allows; None: no such clock, or another zone's abbreviation."""
    try:
        wall = datetime.combine(day, time(hour, minute, int(second or 0)))
    except ValueError:
        return None
    length = _SECOND_US if second is not None else 60 * _SECOND_US
    if abbreviation in _UTC_NAMES:
        readings = [wall.replace(tzinfo=UTC)]
    else:
        readings = [wall.replace(tzinfo=zone, fold=fold) for fold in (0, 1)]
        if abbreviation is not None:
            readings = [r for r in readings if r.tzname() == abbreviation]
    starts = {to_us(r) for r in readings}
    return [(start, start + length - 1) for start in sorted(starts)] or None


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
        times = queries.event_times(conn, site, name, REF_EVENT_KINDS.get(prefix))
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
