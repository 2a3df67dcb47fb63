"""A time-scoped inspector sees a finding only when all it reports lies in its scope (allow-list).

The adversarial probe: an inspector scoped to 20:00-21:00Z got, through the findings API, the day
view and a bundle, a finding that starts at 20:59:49Z inside the scope but whose evaluation
window (21:00:00-21:01:00Z) and text (a truck at 21:00:51Z) lie after it.
"""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.config import parse_config
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from monitor.portal.periods import day_period
from rules.model import Finding, FindingKind, Measurement

CHICAGO = ZoneInfo("America/Chicago")
SITE_TOML = """
[storage]
path = "{db}"
[[sites]]
id = "s1"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
"""
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
    assert manifest["disclosure"]["digest_only"].get("finding", 0) >= 1
    assert verify_bundle(out).ok
    whole = tmp_path / "whole.zip"
    portal.export(everyone, "s1", start, end, whole)
    with zipfile.ZipFile(whole) as zf:
        assert {f["row"]["id"] for f in json.loads(zf.read("records/findings.json"))} == {inside, leak}
        assert "time_scope" not in json.loads(zf.read("manifest.json"))["disclosure"]
