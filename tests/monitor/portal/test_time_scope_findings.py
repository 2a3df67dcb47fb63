"""A time-scoped inspector sees a finding only when all it reports lies in its scope (allow-list).

The adversarial probe: an inspector scoped to 20:00-21:00Z got, through the findings API, the day
view and a bundle, a finding that starts at 20:59:49Z inside the scope but whose evaluation
window (21:00:00-21:01:00Z) and text (a truck at 21:00:51Z) lie after it.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.config import parse_config
from monitor.evidence.format import DIGEST_KIND_NOT_STATED, SOUND_PART
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from monitor.portal.periods import day_period
from monitor.wire.canonical import to_us
from rules.model import Finding, FindingKind, Measurement
from tests.support.config_samples import MINIMAL

CHICAGO = ZoneInfo("America/Chicago")
SITE_TOML = '[storage]\npath = "{db}"\n' + MINIMAL
NOT_BEFORE = datetime(2026, 12, 3, 20, tzinfo=UTC)
NOT_AFTER = datetime(2026, 12, 3, 21, tzinfo=UTC)


def _finding(
    start: datetime, end: datetime, w_start: datetime, w_end: datetime, text: str, value: float
) -> Finding:
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    return Finding(
        site="s1",
        standard="noise",
        section="6.D",
        kind=FindingKind.VIOLATION,
        start=start,
        end=end,
        timezone="America/Chicago",
        summary=text,
        sensors=("n1",),
        measurements=(Measurement("LAeq_60s", value, 65.0, "dB(A)"),),
        refs=(f"sound:n1:{iso(w_start)}/{iso(w_end)}",),
        details={"window_start": iso(w_start), "window_end": iso(w_end)},
    )


def _setup(tmp_path: Path) -> tuple[Portal, Scope, Scope, str, str]:
    db = tmp_path / "p.db"
    config = parse_config(SITE_TOML.format(db=db))
    store = Store(str(db))
    at = datetime(2026, 12, 3, 20, 30, tzinfo=UTC)
    inside = _finding(
        at,
        at + timedelta(minutes=1),
        at,
        at + timedelta(minutes=1),
        "averaged 81.0 dB(A) over 14:30-14:31 local",
        81.0,
    )
    edge = datetime(2026, 12, 3, 20, 59, 49, tzinfo=UTC)
    leak = _finding(
        edge,
        NOT_AFTER + timedelta(minutes=1),
        NOT_AFTER,
        NOT_AFTER + timedelta(minutes=1),
        "averaged 82.5 dB(A) over 15:00-15:01 local; haul truck T07 leaving at 15:00:51",
        82.5,
    )
    with store.batch():
        store.append_finding(inside, NOT_AFTER + timedelta(minutes=5))
        store.append_finding(leak, NOT_AFTER + timedelta(minutes=5))
    now = datetime(2026, 12, 10, tzinfo=UTC)
    portal = Portal(config, clock=lambda: now)
    scoped = Scope(User("ida", "inspector", (), NOT_BEFORE, NOT_AFTER), config)
    everyone = Scope(User("bob", "inspector", ()), config)
    return portal, scoped, everyone, inside.id, leak.id


def _day() -> tuple[datetime, datetime]:
    return datetime(2026, 12, 3, tzinfo=CHICAGO), datetime(2026, 12, 4, tzinfo=CHICAGO)


def test_the_findings_api_leaves_out_a_finding_reporting_past_the_scope(tmp_path: Path) -> None:
    portal, scoped, everyone, inside, leak = _setup(tmp_path)
    seen = json.loads(portal.findings_json(scoped, "s1", *_day()))
    assert [f["id"] for f in seen] == [inside]
    assert "82.5" not in json.dumps(seen)
    assert [f["id"] for f in portal.findings(scoped, "s1", *_day())] == [inside]
    # An unscoped reader still sees both, and its answer is not the scoped one's (nor the reverse).
    assert [f["id"] for f in json.loads(portal.findings_json(everyone, "s1", *_day()))] == [inside, leak]
    assert [f["id"] for f in json.loads(portal.findings_json(scoped, "s1", *_day()))] == [inside]


def test_the_day_view_leaves_out_the_finding_and_its_episode(tmp_path: Path) -> None:
    portal, scoped, everyone, inside, leak = _setup(tmp_path)
    period = day_period(date(2026, 12, 3), CHICAGO)
    view = portal.period(scoped, "s1", period)
    assert [f["id"] for f in view["findings"]] == [inside]
    text = json.dumps(view)
    assert leak not in text and "82.5" not in text and "15:00:51" not in text
    for episode in view["episodes"]:
        assert episode["end"] <= "2026-12-03T21:00:00Z"
    full = portal.period(everyone, "s1", period)
    assert {f["id"] for f in full["findings"]} == {inside, leak}


def test_a_scoped_bundle_carries_the_finding_as_its_digest_alone(tmp_path: Path) -> None:
    from monitor.evidence import verify_bundle

    portal, scoped, everyone, inside, leak = _setup(tmp_path)
    start = datetime(2026, 12, 3, 14, tzinfo=CHICAGO)
    end = datetime(2026, 12, 3, 15, 30, tzinfo=CHICAGO)
    out = tmp_path / "scoped.zip"
    portal.export(scoped, "s1", start, end, out)
    with zipfile.ZipFile(out) as zf:
        findings = json.loads(zf.read("records/findings.json"))
        manifest = json.loads(zf.read("manifest.json"))
        everything = b"".join(zf.read(n) for n in zf.namelist())
    assert [f["row"]["id"] for f in findings] == [inside]
    assert leak.encode() not in everything and b"82.5" not in everything
    assert manifest["disclosure"]["digest_only"].get(DIGEST_KIND_NOT_STATED, 0) >= 1  # kinds not named
    assert verify_bundle(out).ok
    whole = tmp_path / "whole.zip"
    portal.export(everyone, "s1", start, end, whole)
    with zipfile.ZipFile(whole) as zf:
        assert {f["row"]["id"] for f in json.loads(zf.read("records/findings.json"))} == {inside, leak}
        assert "time_scope" not in json.loads(zf.read("manifest.json"))["disclosure"]


def test_an_event_reaching_past_the_scope_is_left_out_of_the_day_view_and_the_bundle(tmp_path: Path) -> None:
    """Declared work that began inside the scope and went on after it tells when it ended: out."""
    from monitor.wire.codec import payload_of
    from rules.model import WorkKind, WorkPeriod

    portal, scoped, everyone, _, _ = _setup(tmp_path)
    inside = WorkPeriod(
        "s1",
        "w-inside",
        NOT_BEFORE + timedelta(minutes=5),
        NOT_BEFORE + timedelta(minutes=20),
        WorkKind.REPAIR,
    )
    across = WorkPeriod(
        "s1",
        "w-across",
        NOT_AFTER - timedelta(minutes=10),
        NOT_AFTER + timedelta(hours=2),
        WorkKind.CONSTRUCTION,
    )
    store = Store(str(tmp_path / "p.db"))
    with store.batch():
        for work in (inside, across):
            assert store.append_event(work, payload_of(work), NOT_BEFORE).stored
    period = day_period(date(2026, 12, 3), CHICAGO)
    exempt = portal.period(scoped, "s1", period)["exempt"]
    assert [e["why"] for e in exempt] == ["work: repair"]
    assert "23:00:00Z" not in json.dumps(exempt)  # the end of the work that ran past the scope
    assert [e["why"] for e in portal.period(everyone, "s1", period)["exempt"]] == [
        "work: repair",
        "work: construction",
    ]
    out = tmp_path / "scoped-events.zip"
    portal.export(
        scoped,
        "s1",
        datetime(2026, 12, 3, 14, tzinfo=CHICAGO),
        datetime(2026, 12, 3, 16, tzinfo=CHICAGO),
        out,
    )
    with zipfile.ZipFile(out) as zf:
        events = json.loads(zf.read("records/events.json"))
        manifest = json.loads(zf.read("manifest.json"))
    assert [e["row"]["id"] for e in events] == ["w-inside"]
    assert manifest["disclosure"]["digest_only"].get(DIGEST_KIND_NOT_STATED, 0) >= 1  # kinds not named
    assert "events" in manifest["disclosure"]["time_scope"]["rule"]


def test_a_scope_with_an_end_gets_no_report(tmp_path: Path) -> None:
    """A report is made as the store holds it now: a notice's later course (deadline, extension,
    correction) can lie after ``not_after``, so such an account gets none; an open scope still does."""
    import pytest

    from monitor.portal.data import NO_REPORTS_IN_A_CLOSED_SCOPE, NotFound

    portal, scoped, everyone, _, _ = _setup(tmp_path)
    with pytest.raises(NotFound) as refused:
        portal.report_period(scoped, "s1", "2026-12")
    assert str(refused.value) == NO_REPORTS_IN_A_CLOSED_SCOPE
    assert portal.report_period(everyone, "s1", "2026-11").label == "2026-11"
    config = portal.config
    open_ended = Scope(User("ian", "inspector", (), datetime(2026, 10, 1, tzinfo=UTC), None), config)
    assert portal.report_period(open_ended, "s1", "2026-11").label == "2026-11"


def test_a_reading_at_the_scopes_end_is_in_the_day_view_the_csv_and_the_bundle(tmp_path: Path) -> None:
    """The scope holds its end (TimeScope.holds, the manifest's not_after_us): the portal's window
    stopped just before it, so a second at exactly 21:00:00Z, in the scoped reader's bundle, was
    cut from the day view's minutes and the sound CSV. Now each holds it and nothing after it."""
    from monitor.evidence import verify_bundle
    from rules.model import SoundLevels

    portal, scoped, _, _, _ = _setup(tmp_path)
    store = Store(str(tmp_path / "p.db"))
    seconds = [NOT_AFTER + timedelta(seconds=n) for n in (-1, 0, 1)]
    with store.batch():
        store.append_sounds(
            [
                (SoundLevels("s1", "n1", t, 1.0, 60.0 + n, 61.0, 70.0), "levels", False)
                for n, t in enumerate(seconds)
            ],
            NOT_AFTER + timedelta(minutes=5),
        )
    store.close()
    held = ["2026-12-03T20:59:59Z", "2026-12-03T21:00:00Z"]

    minutes = portal.period(scoped, "s1", day_period(date(2026, 12, 3), CHICAGO))["sound"]["n1"]
    assert [(ts, laeq) for ts, laeq in minutes if ts >= "2026-12-03T20:59"] == [
        ("2026-12-03T20:59:00Z", 60.0),
        ("2026-12-03T21:00:00Z", 61.0),  # its one second the scope holds, not 21:00:01's 62.0
    ]

    _, lines = portal.sound_csv(
        scoped, "s1", ["n1"], NOT_AFTER - timedelta(minutes=1), NOT_AFTER + timedelta(minutes=1)
    )
    rows = list(csv.reader(io.StringIO(b"".join(lines).decode())))
    assert [r[1] for r in rows[1:] if r[1] >= "2026-12-03T20:59:59"] == held

    out = tmp_path / "end.zip"
    portal.export(scoped, "s1", NOT_AFTER - timedelta(minutes=1), NOT_AFTER + timedelta(minutes=1), out)
    with zipfile.ZipFile(out) as zf:
        parts = sorted(n for n in zf.namelist() if SOUND_PART.fullmatch(n))
        sound = [r for n in parts for r in csv.DictReader(io.StringIO(zf.read(n).decode()))]
        manifest = json.loads(zf.read("manifest.json"))
    assert sound, parts
    assert [r["time_utc"] for r in sound if r["time_utc"] >= "2026-12-03T20:59:59"] == held
    assert manifest["disclosure"]["time_scope"]["not_after_us"] == to_us(NOT_AFTER)
    assert verify_bundle(out).ok
