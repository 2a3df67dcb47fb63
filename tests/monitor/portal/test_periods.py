"""The period views' parts without a browser: the store's per-minute and hourly aggregates
(SQLite, a real store file) against an independent computation here, the choice of the
period a view opens on, the period ladder, and the plot's label layout."""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from monitor.config import parse_config
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.portal import periods
from monitor.portal.data import Portal, Scope, User
from monitor.portal.svg import CHAR_W, LABEL_ROW, DayPlot, label_rows, spread, with_notice_links
from monitor.wire.canonical import to_us
from rules.model import LightSummary, SoundLevels

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
[[sites.sensors]]
id = "n4"
kind = "sound"
placement = "conveyor"
[[sites.sensors]]
id = "l1"
kind = "light"
expected_period_s = 10
[[sites.sensors]]
id = "sky1"
kind = "sky"
expected_period_s = 60
"""


def energy_mean(levels: list[float]) -> float:
    """LAeq of equal-length seconds: 10 log10(mean(10^(L/10)))."""
    return 10 * math.log10(sum(10 ** (v / 10) for v in levels) / len(levels))


def exceeded(levels: list[float], x: int) -> float:
    """Lx as the store defines it: the level of the ceil(x % of n)-th loudest second, to 0.1 dB."""
    loudest_first = sorted(levels, reverse=True)
    return round(loudest_first[math.ceil(x * len(levels) / 100) - 1], 1)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Store, dict[tuple[str, int], float]]:
    """Two meters' seconds over 14:10-16:40 local on 2026-06-01 (one hour of n4 left out, random
    levels, no two the same), written as the daemon writes them."""
    rng = random.Random(26)
    store = Store(str(tmp_path / "s.db"))
    start = datetime(2026, 6, 1, 14, 10, tzinfo=CHICAGO).astimezone(UTC)
    seconds: dict[tuple[str, int], float] = {}
    rows = []
    for s in range(150 * 60):
        ts = start + timedelta(seconds=s)
        for sensor in ("n1", "n4"):
            if sensor == "n4" and 3600 <= s < 7200:
                continue
            laeq = rng.uniform(40.0, 95.0)
            seconds[(sensor, to_us(ts))] = laeq
            rows.append((SoundLevels("s1", sensor, ts, 1.0, laeq, laeq + 1, laeq + 10), "levels", False))
    with store.batch():
        store.append_sounds(rows, start + timedelta(hours=3))
    return store, seconds


def test_minute_and_hourly_levels_agree_with_an_independent_computation(
    store: tuple[Store, dict[tuple[str, int], float]],
) -> None:
    db, seconds = store
    start_us, end_us = min(t for _, t in seconds), max(t for _, t in seconds) + 1
    by_minute: dict[tuple[str, int], list[float]] = defaultdict(list)
    by_hour: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (sensor, ts_us), laeq in seconds.items():
        by_minute[(sensor, ts_us // 60_000_000)].append(laeq)
        by_hour[(sensor, ts_us // 3_600_000_000)].append(laeq)

    minutes = {(r[0], r[1]): r[2] for r in queries.minute_laeq_of_site(db.conn, "s1", start_us, end_us)}
    assert set(minutes) == set(by_minute) and len(minutes) == 150 + 90
    for key, levels in by_minute.items():
        assert minutes[key] == pytest.approx(energy_mean(levels), abs=1e-9)

    hours = queries.hourly_levels_of_site(db.conn, "s1", start_us, end_us)
    assert {(r["sensor"], r["hour"]) for r in hours} == set(by_hour)
    # 14:10-16:40: three clock hours of n1 (50, 60, 40 minutes), of n4 50, 10, 30 (15:10-16:10 left out).
    assert sorted((r["sensor"], r["seconds"]) for r in hours) == [
        ("n1", 2400),
        ("n1", 3000),
        ("n1", 3600),
        ("n4", 600),
        ("n4", 1800),
        ("n4", 3000),
    ]
    for r in hours:
        levels = by_hour[(r["sensor"], r["hour"])]
        assert r["seconds"] == len(levels)
        assert r["laeq"] == pytest.approx(energy_mean(levels), abs=1e-9)
        assert r["l10"] == pytest.approx(exceeded(levels, 10), abs=1e-9)
        assert r["l90"] == pytest.approx(exceeded(levels, 90), abs=1e-9)
        assert r["l90"] < r["laeq"] and r["l90"] < r["l10"]


def test_light_levels_are_the_mean_of_means_and_the_highest_max_per_slot(tmp_path: Path) -> None:
    db = Store(str(tmp_path / "l.db"))
    start = datetime(2026, 6, 2, 3, 0, tzinfo=UTC)
    readings = [(start + timedelta(seconds=10 * k), 0.5 + k * 0.25, 1.0 + k) for k in range(12)]
    with db.batch():
        for ts, mean, peak in readings:
            summary = LightSummary("s1", "l1", ts, 10.0, mean, 0.0, peak)
            payload = {"ts": ts.isoformat(), "lux_mean": mean, "lux_min": 0.0, "lux_max": peak}
            db.append_reading(summary, payload, late=False, now=start)
    rows = queries.light_levels(db.conn, "s1", "light", "l1", to_us(start), to_us(start) + 3_600_000_000, 60)
    assert [(r["lux_mean"], r["lux_max"]) for r in rows] == [
        pytest.approx((sum(m for _, m, _ in readings[:6]) / 6, 6.0)),
        pytest.approx((sum(m for _, m, _ in readings[6:]) / 6, 12.0)),
    ]
    bounds = queries.record_bounds(db.conn, "s1", [("l1", "light")], 0, to_us(start) + 10**12)
    assert bounds == (to_us(readings[0][0]), to_us(readings[-1][0]))
    assert queries.record_bounds(db.conn, "s1", [("l1", "light")], 0, to_us(start)) is None


def _portal(tmp_path: Path, now: datetime) -> tuple[Portal, Store, Scope]:
    db = tmp_path / "p.db"
    config = parse_config(SITE_TOML.format(db=db))
    return Portal(config, clock=lambda: now), Store(str(db)), Scope(User("i", "inspector", ()), config)


def _second(store: Store, sensor: str, when: datetime, laeq: float = 60.0) -> None:
    with store.batch():
        store.append_sounds(
            [(SoundLevels("s1", sensor, when, 1.0, laeq, laeq + 1, laeq + 10), "levels", False)], when
        )


def test_a_view_opens_on_the_hours_of_the_latest_day_with_data_not_an_empty_today(tmp_path: Path) -> None:
    now = datetime(2026, 6, 20, 12, tzinfo=UTC)
    portal, store, scope = _portal(tmp_path, now)
    # No data at all: today, the whole day.
    empty = portal.opening_period(scope, "s1")
    assert empty == periods.day_period(date(2026, 6, 20), CHICAGO)
    _second(store, "n1", datetime(2026, 6, 10, 9, 30, tzinfo=CHICAGO))
    _second(store, "n1", datetime(2026, 6, 12, 14, 50, 10, tzinfo=CHICAGO))
    _second(store, "n4", datetime(2026, 6, 12, 17, 19, 59, tzinfo=CHICAGO))
    opened = portal.opening_period(scope, "s1")
    # The later day, from the hour of its first record to the end of the hour of its last.
    assert (opened.start, opened.end) == (
        datetime(2026, 6, 12, 14, tzinfo=CHICAGO),
        datetime(2026, 6, 12, 18, tzinfo=CHICAGO),
    )
    assert opened.resolution == "minute"
    # A reader whose scope ends before that day opens on the last day it may see.
    early = Scope(User("e", "inspector", (), not_after=datetime(2026, 6, 11, tzinfo=UTC)), scope.config)
    mine = portal.opening_period(early, "s1")
    assert (mine.start, mine.end) == (
        datetime(2026, 6, 10, 9, tzinfo=CHICAGO),
        datetime(2026, 6, 10, 10, tzinfo=CHICAGO),
    )
    # The view of that period has every configured sensor: n4 (conveyor) and sky1 too.
    view, svg = portal.period_view(scope, "s1", opened)
    assert [s["id"] for s in view["sensors"]] == ["n1", "n4", "l1", "sky1"]
    assert set(view["sound"]) == {"n1", "n4"} and set(view["light"]) == {"l1", "sky1"}
    assert [v for _, v in view["sound"]["n4"]] == [60.0]
    for sensor in ("n1", "n4", "l1", "sky1"):
        assert f'id="panel-{sensor}"' in svg


def test_the_period_ladder_aligns_shifts_and_zooms_in_site_time() -> None:
    at = datetime(2026, 12, 10, 16, 2, 30, tzinfo=CHICAGO)  # a Thursday
    hour = periods.aligned("hour", at, CHICAGO)
    assert (hour.start, hour.end) == (at.replace(minute=0, second=0), at.replace(hour=17, minute=0, second=0))
    week = periods.aligned("week", at, CHICAGO)
    assert week.start == datetime(2026, 12, 7, tzinfo=CHICAGO) and week.span == timedelta(days=7)
    month = periods.aligned("month", at, CHICAGO)
    assert (month.start, month.end) == (
        datetime(2026, 12, 1, tzinfo=CHICAGO),
        datetime(2027, 1, 1, tzinfo=CHICAGO),
    )
    assert periods.shifted(month, 1).end == datetime(2027, 2, 1, tzinfo=CHICAGO)
    assert periods.shifted(month, -1).start == datetime(2026, 11, 1, tzinfo=CHICAGO)
    assert periods.step_of(hour) == "hour" and periods.step_of(week) == "week"
    day = periods.aligned("day", at, CHICAGO)
    assert periods.zoomed(day, -1) == periods.aligned("12 hours", at, CHICAGO)
    assert periods.zoomed(day, 1) == week
    assert periods.zoomed(hour, -1) is None and periods.zoomed(month, 1) is None
    assert hour.resolution == "minute" and day.resolution == "minute" and week.resolution == "hour"
    # The day clocks go back has 25 hours and still shows minutes.
    fall = periods.day_period(date(2026, 11, 1), CHICAGO)
    assert fall.span == timedelta(hours=25) and fall.resolution == "minute"
    # A typed period is kept as given and moves by its own length.
    typed = periods.checked_period(at, at + timedelta(minutes=40), CHICAGO)
    assert periods.step_of(typed) is None
    assert periods.shifted(typed, 1).start == at + timedelta(minutes=40)
    # Where a finding is shown: the smallest aligned period around its window.
    minute = periods.around(at, at + timedelta(minutes=1), CHICAGO)
    assert minute == hour
    across = periods.around(at.replace(minute=59), at.replace(hour=17, minute=1), CHICAGO)
    assert periods.step_of(across) == "3 hours"
    assert hour.query() == "from=2026-12-10T16:00&to=2026-12-10T17:00"


def test_each_pass_of_the_repeated_hour_is_an_hour_of_the_ladder() -> None:
    """The hour step made one slot of 01:00-02:00 on the night the clocks go back: two real hours,
    so the second pass (01:00-02:00 CST) had no hour of its own to zoom to or step onto."""
    from urllib.parse import parse_qs

    from monitor.portal import limits

    night = [periods.aligned("hour", datetime(2026, 11, 1, h, 30, tzinfo=UTC), CHICAGO) for h in (5, 6, 7, 8)]
    assert [(p.start.hour, p.end.hour) for p in night] == [(5, 6), (6, 7), (7, 8), (8, 9)]  # UTC
    assert all(p.span == timedelta(hours=1) and periods.step_of(p) == "hour" for p in night)
    for before, after in itertools.pairwise(night):
        assert periods.shifted(before, 1) == after and periods.shifted(after, -1) == before
    # A finding in the second pass is shown in that hour; each link names its readings.
    second = night[2]
    assert periods.around(second.start, second.start + timedelta(minutes=1), CHICAGO) == second
    assert night[1].query() == "from=2026-11-01T01:00&to=2026-11-01T01:00&from_offset=-05:00&to_offset=-06:00"
    assert second.query() == "from=2026-11-01T01:00&to=2026-11-01T02:00&from_offset=-06:00"
    for period in night:  # the link reads back as the same period
        query = {k: v[0] for k, v in parse_qs(period.query()).items()}
        assert (limits.form_time(query, CHICAGO, "from"), limits.form_time(query, CHICAGO, "to")) == (
            period.start,
            period.end,
        )
    # In spring the hour before the gap ends where the clocks jump to (03:00 CDT).
    spring = periods.aligned("hour", datetime(2026, 3, 8, 7, 30, tzinfo=UTC), CHICAGO)
    assert spring.span == timedelta(hours=1) and spring.query() == "from=2026-03-08T01:00&to=2026-03-08T03:00"


@pytest.mark.parametrize(
    ("minutes", "reason"),
    [(-5, "to: must be after from"), (5, "at least 10 minutes"), (60 * 24 * 32, "at most 31 days")],
)
def test_a_period_typed_in_is_refused_with_the_field_and_the_reason(minutes: int, reason: str) -> None:
    at = datetime(2026, 12, 10, 16, tzinfo=UTC)
    with pytest.raises(ValueError, match=reason):
        periods.checked_period(at, at + timedelta(minutes=minutes), CHICAGO)


def test_labels_of_close_marks_are_set_on_rows_that_never_overlap() -> None:
    # Two blasts a minute apart on a day's axis (0.6 px), a third far away, a sunset between.
    marks = [
        (300.0, "blast"),
        (300.6, "blast"),
        (305.0, "unreported blast"),
        (700.0, "blast"),
        (330.0, "sunset"),
    ]
    rows = label_rows(marks)
    assert rows == [0, 1, 2, 0, 3]
    boxes = [(x, x + len(text) * CHAR_W, row) for (x, text), row in zip(marks, rows, strict=True)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] != b[2] or a[1] <= b[0] or b[1] <= a[0], (a, b)
    assert spread([100.0, 104.0, 50.0]) == [100.0, 100.0 + LABEL_ROW, 50.0]


def test_the_plot_sets_two_close_blasts_labels_apart_and_marks_an_unreported_blast() -> None:
    """A period view as the facade makes it (written out here), drawn: no two labels of a panel
    overlap, the violation episode is shaded on its meter's panel, lux is on a log axis."""
    t = "2026-12-10T22:{:02d}:00Z"
    window = {"start": "2026-12-10T16:00:00Z", "end": "2026-12-10T21:00:00Z"}
    view = {
        "site": "s1",
        "timezone": "America/Chicago",
        "from": "2026-12-10T06:00:00Z",
        "to": "2026-12-11T06:00:00Z",
        "span": "a day",
        "resolution": "minute",
        "sensors": [
            {"id": "n3", "kind": "sound", "placement": "boundary", "standard": "6.D", "limit_db": 80.0},
            {"id": "l1", "kind": "light", "placement": "boundary", "standard": None, "limit_db": None},
        ],
        "sound": {"n3": [(t.format(m), 70.0 + m) for m in range(10)]},
        "light": {"l1": [(t.format(m), 3.3, 3.9) for m in range(10)]},
        "light_limits": {"trespass_lux": 1.0, "max_lux": 25.0},
        "days": [{"date": "2026-12-10", "blast_window": window, "sunset": "2026-12-10T22:23:00Z"}],
        "blasts": [{"id": "b1", "ts": t.format(0)}, {"id": "b2", "ts": t.format(1)}],
        "unreported_blasts": [
            {"ts": t.format(2), "sensors": ["n3"], "finding": "f1", "summary": "an impulse"}
        ],
        "exempt": [],
        "episodes": [
            {"id": "ep-1", "sensors": ["n3"], "start": t.format(3), "end": t.format(9), "text": "noise at n3"}
        ],
    }
    svg = DayPlot().render(view)
    panels = re.findall(r'<g class="panel[^"]*" id="panel-(\w+)".*?</g>', svg, re.S)
    assert panels == ["n3", "l1"]
    for body in re.findall(r'<g class="panel.*?</g>', svg, re.S):
        labels = [
            (float(x), float(y), text)
            for x, y, text in re.findall(
                r'<text class="label [^"]*-label" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]+)<', body
            )
            if "limit" not in text
        ]
        assert {text for *_, text in labels} >= {"blast", "sunset"}
        for i, (x1, y1, a) in enumerate(labels):
            for x2, y2, b in labels[i + 1 :]:
                apart = x1 + len(a) * CHAR_W <= x2 or x2 + len(b) * CHAR_W <= x1
                assert apart or abs(y1 - y2) >= LABEL_ROW, (a, b, x1, x2, y1, y2)
    n3 = svg[svg.index('id="panel-n3"') : svg.index('id="panel-l1"')]
    assert n3.count('class="episode"') == 1 and 'class="unreported-blast"' in n3
    assert svg.count('class="unreported-blast"') == 1  # only on the meter that heard it
    # Lux on a log axis: 3.3 lux sits between the 1 and 10 lux ticks, above the trespass limit.
    l1 = svg[svg.index('id="panel-l1"') :]
    ticks = {
        text: float(y)
        for y, text in re.findall(r'class="tick" x="\d+" y="([\d.]+)" text-anchor="end">([^<]+)<', l1)
    }
    assert {"0.01", "0.1", "1", "10", "100"} <= set(ticks)
    level_y = float(re.search(r'class="lux-mean" points="[\d.]+,([\d.]+)', l1)[1])  # type: ignore[index]
    decade = ticks["1"] - ticks["10"]
    assert level_y == pytest.approx(ticks["1"] - 4 - decade * math.log10(3.3), abs=0.2)


def test_a_week_view_follows_new_seconds_hour_by_hour_and_equals_a_fresh_computation(tmp_path: Path) -> None:
    """The hourly levels of a week are kept (HourCache) and only the hours that gained seconds
    are aggregated again: the view after a new second equals one computed from scratch."""
    now = datetime(2026, 6, 20, 12, tzinfo=UTC)
    portal, store, scope = _portal(tmp_path, now)
    nine = datetime(2026, 6, 10, 9, 0, tzinfo=CHICAGO)
    for s in range(0, 600, 10):
        _second(store, "n1", nine + timedelta(seconds=s), 50.0 + s / 100)
    week = periods.aligned("week", nine, CHICAGO)
    view, _ = portal.period_view(scope, "s1", week)
    assert view["resolution"] == "hour"
    [(ts, laeq, l10, l90)] = view["sound"]["n1"]
    levels = [50.0 + s / 100 for s in range(0, 600, 10)]
    assert ts == "2026-06-10T14:00:00Z" and laeq == round(energy_mean(levels), 1)
    assert (l10, l90) == (exceeded(levels, 10), exceeded(levels, 90))
    assert view["sound"]["n4"] == []
    # A loud second in that hour and one in a new hour of n4.
    _second(store, "n1", nine + timedelta(minutes=30), 90.0)
    _second(store, "n4", nine + timedelta(hours=5), 70.0)
    changed, _ = portal.period_view(scope, "s1", week)
    assert changed["sound"]["n1"][0][1] == round(energy_mean([*levels, 90.0]), 1)
    assert changed["sound"]["n4"] == [("2026-06-10T19:00:00Z", 70.0, 70.0, 70.0)]
    fresh, _ = Portal(scope.config, clock=lambda: now).period_view(scope, "s1", week)
    assert fresh["sound"] == changed["sound"]


def test_an_episodes_shading_links_to_its_findings_or_for_a_reader_of_notices_to_its_notice() -> None:
    """The plot is drawn once for every reader with links to the episodes' findings on the page;
    with_notice_links swaps in the notice's page for an episode that has a notice, and only it."""
    view: dict[str, Any] = {
        "site": "s1",
        "timezone": "America/Chicago",
        "from": "2026-12-10T21:00:00Z",
        "to": "2026-12-10T23:00:00Z",
        "span": "two hours",
        "resolution": "minute",
        "sensors": [
            {"id": "n3", "kind": "sound", "placement": "boundary", "standard": "6.D", "limit_db": 80.0}
        ],
        "sound": {"n3": [(f"2026-12-10T22:0{m}:00Z", 85.0) for m in range(5)]},
        "light": {},
        "light_limits": {},
        "days": [],
        "blasts": [],
        "unreported_blasts": [],
        "exempt": [],
        "episodes": [
            {"id": "ep-1", "sensors": ["n3"], "start": "2026-12-10T22:00:00Z", "end": "2026-12-10T22:04:00Z",
             "text": "noise at n3", "notice": "DOV-2026-0002"},
            {"id": "ep-2", "sensors": ["n3"], "start": "2026-12-10T22:30:00Z", "end": "2026-12-10T22:31:00Z",
             "text": "more noise", "notice": None},
        ],
    }  # fmt: skip
    drawn = DayPlot().render(view)
    links = re.findall(
        r'<a class="episode-link" href="([^"]+)" data-episode="([^"]+)"><title>([^<]+)</title>', drawn
    )
    assert links == [
        ("#episode-ep-1", "ep-1", "violation: noise at n3 (its findings on this page)"),
        ("#episode-ep-2", "ep-2", "violation: more noise (its findings on this page)"),
    ]
    assert drawn.count('<rect class="episode"') == 2 and drawn.count("</a>") == 2
    town = with_notice_links(drawn, view["episodes"])
    links = re.findall(
        r'<a class="episode-link" href="([^"]+)" data-episode="([^"]+)"><title>([^<]+)</title>', town
    )
    assert links == [
        ("/notices/DOV-2026-0002", "ep-1", "violation: noise at n3 (open notice DOV-2026-0002)"),
        ("#episode-ep-2", "ep-2", "violation: more noise (its findings on this page)"),
    ]
    # Nothing else of the plot changes.
    assert (
        town.replace("/notices/DOV-2026-0002", "#episode-ep-1").replace(
            "open notice DOV-2026-0002", "its findings on this page"
        )
        == drawn
    )
