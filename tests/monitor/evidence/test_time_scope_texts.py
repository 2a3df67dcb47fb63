"""A time-scoped reader and the times a record's texts name in site time, each way they are written.

The rules and notices write times for people in the site's zone ("2026-07-01 16:05 CDT",
"16:05", "at 16:05:00 local on 2026-07-01", "01:30 CDT" where the clocks repeat), and a person's
note or a declared work's description may say "at 4:05 pm" or "July 1". A record is shown to a
scoped reader only when every time its texts name is placed and lies in the scope; a time-like
word that cannot be placed keeps the record out.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.config import AccountConfig
from monitor.evidence import load_anchors, verify_bundle
from monitor.evidence.disclosure import Disclosure, TimeScope
from monitor.evidence.format import DIGEST_KIND_NOT_STATED
from monitor.evidence.verify import Report
from monitor.journal.store import Store
from monitor.notify import notices
from monitor.portal.data import User
from monitor.wire.canonical import to_us
from rules import blast_notice, lighting, temporary_lighting
from rules.blast_notice import BlastNoticeParams
from rules.deadlines import deadline_words
from rules.model import Finding, FindingKind, Measurement
from rules.profile import load_profile
from rules.temporary_lighting import TemporaryLightingParams
from tests.support.evidence import SITE, T0, WINDOW, build_site, export
from tests.support.paths import REPO
from tests.support.rule_builders import make_site

FERNHILL = REPO / "tests" / "data" / "profiles" / "fernhill.toml"

TZ = ZoneInfo("America/Chicago")


def _local(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=TZ)


NOT_BEFORE = _local(2026, 6, 15, 11, 0)
NOT_AFTER = _local(2026, 6, 15, 14, 0)
WORK = (_local(2026, 6, 15, 11, 30), _local(2026, 6, 15, 12, 0))


def _event(
    description: str, start: datetime = WORK[0], end: datetime = WORK[1], **members: object
) -> dict[str, object]:
    """A declared work period's stored row (events: ts_us, end_us, data as the daemon keeps it),
    with ``members`` added to its JSON text."""
    data = {
        **members,
        "description": description,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "kind": "crushing",
    }
    return {
        "kind": "work",
        "id": "w-1",
        "ts_us": to_us(start),
        "end_us": to_us(end),
        "data": json.dumps(data),
    }


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ("crusher running", True),
        ("crusher started 11:40 CDT", True),
        ("crusher started 2026-06-15 11:40 CDT", True),
        ("crusher started at 11:40 am", True),
        ("crusher started at 16:05 UTC", True),  # 11:05 CDT
        ("until 2026-06-15 13:59 CDT", True),  # the minute ends before the scope does
        # outside the scope, each way a time is written
        ("again 2026-07-01 16:05 CDT", False),  # a local stamp with its zone's abbreviation
        ("again 2026-07-01 16:05", False),  # ... without one
        ("again 2026-07-01T16:05:00", False),  # ISO 8601 without an offset
        ("again 2026-06-15 14:00:30 CDT", False),  # to the second, 30 s after the scope
        ("again at 16:05 CDT", False),  # a clock alone: the record's own day
        ("again at 16:05", False),
        ("again at 16:05:00 local on 2026-06-15", False),
        ("again at 4:05 pm", False),
        ("again at 4 PM", False),
        ("began at 10:59 am", False),  # before it
        ("again on 2026-07-01", False),  # a date alone is its whole day
        ("again at 16:05 local on 2026-07-01", False),  # a clock on the day the text names
        # that cannot be placed
        ("at 2026-06-15 12:00 EST", False),  # another zone's abbreviation (CDT in June)
        ("again on 7/1/2026", False),
        ("again on 2026-7-1", False),
        ("again on 2026/07/01", False),
        ("again on July 1", False),
        ("again on the 1st of July", False),
        # named relative to when it was written: no day to place it on (2026-06-15 is a Monday)
        ("again next Tuesday", False),
        ("started yesterday", False),
        ("loud again last night", False),
        ("running since this morning", False),
        ("again on Sat", False),
        ("again Sat 11:45", False),  # the clock alone is inside the scope
        ("again Tuesday's shift", False),
        ("stopped two days ago", False),
        ("the blast Tuesday was loud", False),  # a weekday alone, in a sentence
        ("trucks came Sunday", False),
        ("trucks came sunday night", False),
        ("ran Monday", False),  # the record's own weekday, which the text does not say it is
        ("loud overnight", False),
        ("started the day before", False),
        ("stopped the night after", False),
        ("again the next morning", False),
        ("trucks at midnight", False),  # between two days, which the text does not name
        ("again tonight", False),
        ("running since this afternoon", False),
        ("loud this evening", False),
        ("the deadline is today", False),  # not a cure reminder's "the cure deadline is <stamp>, today"
        # words that name no time
        ("crusher may run a second shift", True),
        ("a second screen, May's spare", True),
        ("not run on a weekend", True),
        ("Sundays and holidays included", True),
        ("closed days: sunday", True),
        ("not on a Sunday or legal holiday", True),
        ("every Saturday, Sunday and holiday", True),
        ("sat idle in the sun 20 minutes at 11:40", True),
        ("crusher started at noon", True),  # 12:00, in the scope (test_noon_is_the_clock_12_00)
        ("a seasonal afternoon shift", True),
    ],
)
def test_a_text_naming_a_time_outside_the_scope_keeps_the_record_out(description: str, shown: bool) -> None:
    """A pure check: the refs a text may name are looked up in ``conn``, and these name none."""
    scope = TimeScope(to_us(NOT_BEFORE), to_us(NOT_AFTER))
    conn = sqlite3.connect(":memory:")
    assert scope.shows(conn, SITE, "event", _event(description), TZ) is shown


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ("The blast yesterday cracked a window", False),
        ("Loud trucks last night", False),
        ("The blast next Tuesday must be announced", False),
        ("The blast may have cracked a window; a second one rattled the doors", True),
    ],
)
def test_a_complaint_naming_a_day_relative_to_when_it_was_written_is_kept_out(
    description: str, shown: bool
) -> None:
    """A complaint received inside the scope saying "yesterday" or "last night" (before the scope)
    or "next Tuesday" was shown: only dates and clocks counted as time-like words. A day named
    relative to the complaint cannot be placed, so the complaint is kept out, as one saying
    "July 1" is; a text without one is shown."""
    scope = TimeScope(to_us(NOT_BEFORE), to_us(NOT_AFTER))
    received = _local(2026, 6, 15, 12, 0)
    row = {
        "received_us": to_us(received),
        "start_us": to_us(received - timedelta(minutes=20)),
        "end_us": to_us(received - timedelta(minutes=10)),
        "data": json.dumps({"category": "blasting", "description": description}),
    }
    assert scope.shows(sqlite3.connect(":memory:"), SITE, "complaint", row, TZ) is shown


@pytest.mark.parametrize(
    ("description", "shown"),
    [("01:30 CDT", True), ("01:30 CST", False), ("01:30", False)],
)
def test_a_clock_the_zone_repeats_is_read_by_its_abbreviation_or_at_both_readings(
    description: str, shown: bool
) -> None:
    """2026-11-01 01:30 in Chicago is 06:30Z (CDT) and, after the clocks fall back, 07:30Z (CST)."""
    scope = TimeScope(
        to_us(datetime.fromisoformat("2026-11-01T06:00:00Z")),
        to_us(datetime.fromisoformat("2026-11-01T07:00:00Z")),
    )
    start, end = (
        datetime.fromisoformat("2026-11-01T06:20:00Z"),
        datetime.fromisoformat("2026-11-01T06:40:00Z"),
    )
    conn = sqlite3.connect(":memory:")
    assert scope.shows(conn, SITE, "event", _event(f"crusher started {description}", start, end), TZ) is shown


@pytest.mark.parametrize(
    ("not_after", "shown"),
    [(_local(2026, 6, 15, 12, 1), True), (_local(2026, 6, 15, 11, 59), False)],
)
def test_noon_is_the_clock_12_00(not_after: datetime, shown: bool) -> None:
    """ "at noon" was no time at all, so a record saying it was shown whatever the scope held; it
    is 12:00 on the record's own day, as "at 12 pm" is."""
    scope = TimeScope(to_us(NOT_BEFORE), to_us(not_after))
    work = _event("crusher stopped at noon", WORK[0], WORK[0] + timedelta(minutes=10))
    assert scope.shows(sqlite3.connect(":memory:"), SITE, "event", work, TZ) is shown


# 2026-07-07 is a Tuesday; the scope is that whole site day, a declared work period inside it.
TUESDAY = (_local(2026, 7, 7, 0, 0), _local(2026, 7, 8, 0, 0) - timedelta(microseconds=1))


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ("on Tuesday 2026-07-07", True),
        ("Tue, 2026-07-07 11:40 CDT", True),
        ("Tuesday 2026-07-07 at 11:40", True),
        ("on Monday 2026-07-07", False),  # not the date's weekday: another day
        ("on Tuesday 2026-07-07, again Wednesday", False),
        ("on Wednesday 2026-07-08", False),  # the date's own weekday, the date outside the scope
    ],
)
def test_a_weekday_beside_its_own_date_names_no_other_day(description: str, shown: bool) -> None:
    """ "on Tuesday 2026-07-07" kept the record out of a scope holding that whole Tuesday: the
    weekday, read once the date was, named a day of no week. The date's own weekday repeats it."""
    scope = TimeScope(to_us(TUESDAY[0]), to_us(TUESDAY[1]))
    work = _event(description, _local(2026, 7, 7, 11, 30), _local(2026, 7, 7, 12, 0))
    assert scope.shows(sqlite3.connect(":memory:"), SITE, "event", work, TZ) is shown


def _account_scope(not_before: str, not_after: str, timezone: str = "UTC") -> TimeScope:
    """The time scope the portal gives an inspector account with these times at a site in
    ``timezone`` (User.of, User.bounds, as Scope.times makes it)."""
    account = AccountConfig("ida", "inspector", "scrypt$", not_before=not_before, not_after=not_after)
    scope = TimeScope.of(*User.of(account).bounds(timezone), {})
    assert scope is not None
    return scope


def _utc(day: int, hour: int, minute: int, second: float = 0) -> datetime:
    return datetime(2026, 7, day, hour, minute, tzinfo=UTC) + timedelta(seconds=second)


@pytest.mark.parametrize(
    ("description", "start", "end", "shown"),
    [
        ("again on 2026-07-07", _utc(7, 11, 30), _utc(7, 12, 0), True),
        ("until 2026-07-07 23:59", _utc(7, 11, 30), _utc(7, 12, 0), True),  # its minute, to 23:59:59.999999
        ("until 23:59", _utc(7, 11, 30), _utc(7, 12, 0), True),  # the record's own day
        ("crusher running", _utc(7, 23, 59, 59.5), _utc(7, 23, 59, 59.75), True),  # the last second
        ("again on 2026-07-08", _utc(7, 11, 30), _utc(7, 12, 0), False),
        ("again 2026-07-08 00:00", _utc(7, 11, 30), _utc(7, 12, 0), False),
        ("crusher running", _utc(7, 23, 59, 59.5), _utc(8, 0, 0), False),  # ends at the next midnight
    ],
)
def test_a_scope_given_by_dates_holds_its_whole_last_day(
    description: str, start: datetime, end: datetime, shown: bool
) -> None:
    """not_after = "2026-07-07" ended at 23:59:59, while a text naming 2026-07-07 (or its 23:59)
    is read to 23:59:59.999999: no text naming the scope's last day was shown, nor a record in
    its last second, though the inspector was given that whole day. (The site keeps UTC, the
    zone of the account's dates, so its days are the scope's.)"""
    scope = _account_scope("2026-07-01", "2026-07-07")
    work = _event(description, start, end)
    assert scope.shows(sqlite3.connect(":memory:"), SITE, "event", work, UTC) is shown


def test_a_scope_given_by_dates_holds_the_sites_local_days() -> None:
    """A date in the scope is the site's local day, as every date a person gives minewatch is
    read: read in UTC, "2026-07-07" at a Dovre site (CDT) ran from 19:00 on 6 July to 18:59 on 7
    July, showing the evening before and hiding the evening of the day given."""
    scope = _account_scope("2026-07-07", "2026-07-07", "America/Chicago")
    conn = sqlite3.connect(":memory:")
    evening = _event("running", _utc(8, 3, 0), _utc(8, 4, 59, 59.999999))  # 22:00-23:59 CDT on the 7th
    before = _event("running", _utc(7, 3, 0), _utc(7, 4, 0))  # 22:00-23:00 CDT on the 6th
    assert scope.shows(conn, SITE, "event", evening, TZ)
    assert not scope.shows(conn, SITE, "event", before, TZ)
    assert scope.not_before_us == to_us(_utc(7, 5, 0))  # 00:00 CDT
    local = _account_scope("2026-07-07T08:00", "2026-07-07T17:00", "America/Chicago")
    assert (local.not_before_us, local.not_after_us) == (to_us(_utc(7, 13, 0)), to_us(_utc(7, 22, 0)))


def test_a_scope_ended_by_a_time_ends_there() -> None:
    scope = _account_scope("2026-07-01", "2026-07-07T12:00:00Z")
    assert scope.not_after_us == to_us(_utc(7, 12, 0))
    conn = sqlite3.connect(":memory:")
    assert scope.shows(conn, SITE, "event", _event("running", _utc(7, 11, 0), _utc(7, 12, 0)), UTC)
    assert not scope.shows(conn, SITE, "event", _event("running", _utc(7, 11, 0), _utc(7, 12, 0, 0.5)), UTC)
    assert not scope.shows(conn, SITE, "event", _event("until 12:00", _utc(7, 11, 0), _utc(7, 11, 30)), UTC)


def _generated_texts() -> list[str | dict[str, object]]:
    """Every text the rules and notices write that names a weekday, midnight, overnight or a day
    counted from another (grep rules/ and monitor/ for them): each says a rule, no day."""
    dovre, land, fernhill = (load_profile(p) for p in ("dovre", "land-disturbing", str(FERNHILL)))
    profiles = (dovre, land, fernhill)
    standards = [s for p in profiles for s in p.standards.values()]
    readings = [*(c for p in profiles for c in p.considered), *(c for s in standards for c in s.considered)]
    # what a notice quotes of its standard
    quoted = [t for s in standards for t in (s.summary, s.text, s.required_action)]
    deadline = _local(2026, 7, 7, 23, 59)
    closed_days: list[dict[str, object]] = [{"cure_closed_days": list(p.cure_closed_days)} for p in profiles]
    counting = TemporaryLightingParams()
    site = make_site()
    notice_hours = BlastNoticeParams(
        hours_exclude=("sunday", "wisconsin"), hours_source="Wis. Stat. 990.001(4)(a)"
    )
    return [
        *readings,  # the profiles' readings, which findings and notices list ("after midnight")
        *quoted,
        *temporary_lighting.considered(counting),  # "switched off briefly at midnight"
        *temporary_lighting.considered(replace(counting, overnight_counts_as_one_day=False)),
        "per use, an overnight use is one day",  # a temporary-lighting finding's counting
        lighting.temporary_considered(counting.counting),  # "from the next day on"
        *blast_notice.considered(BlastNoticeParams(hours_source="Wis. Stat. 990.001(4)(a)"), site),
        *blast_notice.considered(notice_hours, site),  # "midnight to midnight, the days of sunday"
        # a notice's record: its closed days and its deadline rule ("a Saturday, Sunday or legal holiday")
        *closed_days,
        *(notices._deadline_rule(replace(p, cure_next_business_day=True)) for p in profiles),
        {"weekend": ["saturday", "sunday"], "hours_exclude": ["sunday", "wisconsin"]},  # params
        # the verdicts (6.F, 6.G) on a polar day and a Saturday
        "Blast B-7 at 2026-07-07 11:40 CDT after 15:00 but before midnight on a day the sun does"
        " not set (polar day), for a recorded safety reason (wall unstable) (6.F)",
        "Blast B-7 at 2026-07-07 11:40 CDT after 15:00 on a day the sun does not rise (polar night),"
        " so there is no daylight for a safety exception (6.F)",
        "Haul truck t-17 entered at gate g1 at 11:40:00 local on 2026-07-07, on a weekend (6.G)",
        # a cure reminder's change names the deadline it sets and its day
        *(
            f"Notice DOV-2026-0001 (Noise): the cure deadline is 2026-07-07 23:59 CDT, {when}. Correct"
            " the violation before then, or ask the Town for more time (13.3.A)."
            for when in (deadline_words(deadline, deadline - timedelta(days=d), TZ) for d in (0, 1))
        ),
    ]


@pytest.mark.parametrize("text", _generated_texts())
def test_a_generated_text_keeps_nothing_out(text: str | dict[str, object]) -> None:
    """What the rules write as a rule ("a Sunday or legal holiday", "midnight sun", "an overnight
    use", a notice's "cure_closed_days": ["sunday"]) names no day: a scope holding the record's
    days shows it. A sentence is read as a text, members as the record's JSON has them."""
    scope = TimeScope(to_us(TUESDAY[0] - timedelta(days=1)), to_us(TUESDAY[1] + timedelta(days=1)))
    sentence, members = (text, {}) if isinstance(text, str) else ("", text)
    work = _event(sentence, _local(2026, 7, 7, 11, 30), _local(2026, 7, 7, 12, 0), **members)
    assert scope.shows(sqlite3.connect(":memory:"), SITE, "event", work, TZ)


def _finding(start: datetime, summary: str, sensor: str) -> Finding:
    return Finding(
        SITE,
        "noise",
        "6.D",
        FindingKind.VIOLATION,
        start,
        start + timedelta(seconds=30),
        "America/Chicago",
        summary,
        (sensor,),
        (Measurement("LAeq", 83.5, 80.0, "dB(A)"),),
    )


def test_a_scoped_bundle_carries_a_finding_naming_a_local_time_outside_the_scope_as_its_digest(
    tmp_path: Path,
) -> None:
    """Through a real export and verify: the window's findings, one naming a site time before the
    scope (01:15 CST, 07:15Z), one naming its own (01:58:10 CST)."""
    findings, report = _scoped_bundle_of_two_findings(
        tmp_path,
        "83.5 dB(A) at n1 at 01:58:10 CST (INSIDE-NAMED)",
        "83.5 dB(A) at n2, as at 01:15 CST (OUTSIDE-NAMED)",
    )
    assert b"INSIDE-NAMED" in findings
    assert b"OUTSIDE-NAMED" not in findings
    assert report.ok, report.lines()
    assert report.digest_only == {DIGEST_KIND_NOT_STATED: 1}  # the finding, its kind not named


def _scoped_bundle_of_two_findings(tmp_path: Path, n1: str, n2: str) -> tuple[bytes, Report]:
    """A site whose window holds two findings (of n1 and n2, with these texts), anchored after them:
    its bundle for a reader scoped to the window (its findings.json) and the bundle's verification."""
    site = build_site(tmp_path, final_anchor=False)
    store = Store(site.store)
    at = T0 + timedelta(seconds=10)
    with store.batch():
        store.append_finding(_finding(at, n1, "n1"), at)
        store.append_finding(_finding(at, n2, "n2"), at)
        now = T0 + timedelta(minutes=5)
        seq, head = store.head(SITE)
        store.conn.execute("INSERT INTO anchors VALUES (?,?,?,?)", (SITE, seq, head, to_us(now)))
        store.restate_config(SITE, now)
    store.close()
    anchors = json.loads(site.anchors.read_text())
    site.anchors.write_text(
        json.dumps([*anchors, {"site": SITE, "seq": seq, "head": head, "ts": now.isoformat()}])
    )
    scope = TimeScope(to_us(WINDOW[0]), to_us(WINDOW[1]))
    bundle = export(site, tmp_path / "b.zip", disclosure=Disclosure(time_scope=scope))
    with zipfile.ZipFile(bundle) as zf:
        findings = zf.read("records/findings.json")
    return findings, verify_bundle(bundle, load_anchors(site.anchors))


def test_a_scoped_bundle_carries_a_finding_naming_a_day_by_its_weekday_as_its_digest(tmp_path: Path) -> None:
    """Through a real export and verify: a finding saying "the blast Sunday" (which Sunday?) was
    in clear, a weekday alone taken for a rule's; it is kept out, and one saying a rule's weekday
    and midnight ("a Sunday or legal holiday", "midnight sun") is in clear."""
    findings, report = _scoped_bundle_of_two_findings(
        tmp_path,
        "83.5 dB(A) at n1, not a Sunday or legal holiday, no midnight sun (RULE-NAMED)",
        "83.5 dB(A) at n2, as loud as the blast Sunday (DAY-NAMED)",
    )
    assert b"RULE-NAMED" in findings
    assert b"DAY-NAMED" not in findings
    assert report.ok, report.lines()
    assert report.digest_only == {DIGEST_KIND_NOT_STATED: 1}
