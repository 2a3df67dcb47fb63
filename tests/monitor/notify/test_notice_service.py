"""The Town serving a notice (13.3.A): minewatch draws a notice up when it finds the violation,
and the Operator's days to correct count from its issue by the Town, which may come later.
On a real SQLite store with a controlled clock, and the CLI as a user runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.journal.store import Store
from monitor.notify.document import header_rows
from monitor.notify.notices import InvalidTransition, NoticeBook
from monitor.wire.protocol import format_ts
from rules.deadlines import end_of_local_day
from tests.monitor.notify.test_notices import run_cli
from tests.support.notices import TZ, local, site_and_profile, store_findings, violation

# Drawn up Monday 15 June 2026 11:31 CDT: the first deadline is the end of Monday 29 June.
ISSUED = local(2026, 6, 15, 11, 31, 6)
FIRST = end_of_local_day(datetime(2026, 6, 29).date(), TZ)


def _open(store: Store, config: Config, issued: datetime = ISSUED) -> str:
    site, profile = site_and_profile(config)
    found = store_findings(store, [violation(issued - timedelta(minutes=2))], issued)
    [event] = NoticeBook(store).on_findings(site, profile, found, issued)
    return event.notice_id


def test_serving_counts_the_cure_period_from_the_service(store: Store, config: Config) -> None:
    notice_id = _open(store, config)
    book = NoticeBook(store)
    served = local(2026, 6, 18, 10, 0)
    event = book.serve(
        notice_id, served, "Town clerk", "by hand at the scale house", served + timedelta(hours=1)
    )

    notice = book.get(notice_id)
    assert notice.status == "open"
    assert notice.deadline == end_of_local_day(datetime(2026, 7, 2).date(), TZ)  # 14 days after June 18
    assert (event.change, event.kind, event.audiences) == ("served", "notice_served", ("operator", "town"))
    assert event.message == (
        f"Notice {notice_id} was served on the Operator 2026-06-18 10:00 CDT by Town clerk; the cure "
        "deadline is now 2026-07-02 23:59 CDT (14 days after service). by hand at the scale house"
    )
    assert event.payload["deadline_local"] == "2026-07-02 23:59 CDT"
    history = book.history(notice_id)
    assert [c.change for c in history] == ["opened", "served"]
    assert history[-1].data == {
        "served": "2026-06-18T15:00:00Z",
        "previous_deadline": "2026-06-30T04:59:59.999Z",
        "counted_deadline": "2026-07-03T04:59:59.999Z",
    }
    rows = dict(header_rows(notice, None, history))
    assert rows["Served"] == "2026-06-18 10:00 CDT (2026-06-18T15:00:00Z) by Town clerk"
    assert rows["Cure deadline"].startswith(
        "2026-07-02 23:59 CDT (counted from service; first deadline 2026-06-29 23:59 CDT)"
    )


def test_a_later_deadline_stays_and_a_notice_is_served_once(store: Store, config: Config) -> None:
    notice_id = _open(store, config)
    book = NoticeBook(store)
    book.extend(notice_id, None, "Town clerk", "parts on order", ISSUED + timedelta(days=1), extra_days=30)
    extended = book.get(notice_id).deadline
    served = local(2026, 6, 17, 9, 0)
    event = book.serve(notice_id, served, "Town clerk", "", served)
    assert book.get(notice_id).deadline == extended
    assert "the cure deadline stays 2026-07-29 23:59 CDT, later than 14 days after service" in event.message
    with pytest.raises(InvalidTransition, match="was served already, 2026-06-17 09:00 CDT"):
        book.serve(notice_id, served + timedelta(days=1), "Town clerk", "", served + timedelta(days=1))


@pytest.mark.parametrize(
    ("served", "now", "refusal"),
    [
        (ISSUED - timedelta(hours=2), ISSUED, "it cannot have been served 2026-06-15 09:31 CDT, before that"),
        (ISSUED + timedelta(days=2), ISSUED + timedelta(days=1), "is still to come"),
    ],
    ids=["before-the-issue", "in-the-future"],
)
def test_a_service_the_record_cannot_hold_is_refused(
    store: Store, config: Config, served: datetime, now: datetime, refusal: str
) -> None:
    notice_id = _open(store, config)
    book = NoticeBook(store)
    with pytest.raises(InvalidTransition, match=refusal):
        book.serve(notice_id, served, "Town clerk", "", now)
    assert [c.change for c in book.history(notice_id)] == ["opened"]


def test_a_closed_notice_is_not_served(store: Store, config: Config) -> None:
    notice_id = _open(store, config)
    book = NoticeBook(store)
    book.close(notice_id, "corrected on inspection", "Town clerk", ISSUED + timedelta(days=1))
    with pytest.raises(InvalidTransition, match="is corrected; 'served' is possible only while"):
        book.serve(notice_id, ISSUED + timedelta(days=2), "Town clerk", "", ISSUED + timedelta(days=2))


def test_cli_serve_takes_a_day_or_a_time(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`notices serve ID --on DAY`: the day of issue itself means the moment of issue (the day's
    start would come before it); mistakes are one line and exit 2, nothing written."""
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    issued = datetime.now(UTC) - timedelta(hours=1)
    store = Store(db)
    try:
        notice_id = _open(store, config, issued)
    finally:
        store.close()
    capsys.readouterr()
    serve = ["notices", "serve", notice_id, "--by", "Town clerk", "--config", str(path)]
    assert run_cli([*serve, "--on", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--on: expected a date or a time" in err
    assert run_cli([*serve]) == 2
    assert "--on" in capsys.readouterr().err
    before = (issued.astimezone(TZ).date() - timedelta(days=1)).isoformat()
    assert run_cli([*serve, "--on", before]) == 2  # a day before the issue is not made the issue
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "before that" in err
    day = issued.astimezone(TZ).date().isoformat()
    assert run_cli([*serve, "--on", day, "--note", "certified mail"]) == 0
    assert capsys.readouterr().out.startswith(f"Notice {notice_id} was served on the Operator ")
    store = Store(db)
    try:
        [served] = [c for c in NoticeBook(store).history(notice_id) if c.change == "served"]
    finally:
        store.close()
    assert served.data["served"].startswith(issued.strftime("%Y-%m-%dT%H:%M"))
    assert served.actor == "Town clerk" and served.note == "certified mail"


@pytest.mark.parametrize(
    "days_after_issue", [pytest.param(1, id="a-later-day"), pytest.param(0, id="the-issue-day")]
)
def test_a_service_given_as_a_day_is_told_as_that_day(
    days_after_issue: int, db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`notices serve ID --on DAY` gave a day and no time: the record says so (served_day) and the
    message and the document (`notices show`) say the day alone, not the day's 00:00 (or, on the
    day of issue, the issue's time) that the cure period is counted from, unchanged."""
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    issued = datetime.now(UTC) - timedelta(days=3)
    store = Store(db)
    try:
        notice_id = _open(store, config, issued)
    finally:
        store.close()
    capsys.readouterr()
    day = issued.astimezone(TZ).date() + timedelta(days=days_after_issue)
    serve = [
        "notices",
        "serve",
        notice_id,
        "--on",
        day.isoformat(),
        "--by",
        "Town clerk",
        "--config",
        str(path),
    ]
    assert run_cli(serve) == 0
    said = capsys.readouterr().out
    assert said.startswith(
        f"Notice {notice_id} was served on the Operator {day.isoformat()} by Town clerk;"
    ), said
    store = Store(db)
    try:
        book = NoticeBook(store)
        [served] = [c for c in book.history(notice_id) if c.change == "served"]
        deadline = book.get(notice_id).deadline
    finally:
        store.close()
    assert served.data["served_day"] == day.isoformat()
    counted_from = max(datetime.combine(day, datetime.min.time(), TZ), issued)  # as before: unchanged
    assert served.data["served"] == format_ts(counted_from)
    assert deadline == end_of_local_day(day + timedelta(days=14), TZ)
    assert run_cli(["notices", "show", notice_id, "--config", str(path)]) == 0
    document = capsys.readouterr().out
    [line] = [line for line in document.splitlines() if "Served" in line and "Town clerk" in line]
    assert line.split("Served", 1)[1].strip(" |*:") == f"{day.isoformat()} by Town clerk", line


def test_cli_serve_at_a_time_that_occurs_twice_asks_for_its_offset(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--on 01:30` on the day the clocks go back was taken as the first 01:30 (CDT) silently;
    the Town's clerk who served it at the second (CST) had the service recorded an hour early."""
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    year = datetime.now(UTC).year - 1  # last year's autumn: past, and the notice still open
    fall_back = next(d for d in range(1, 8) if datetime(year, 11, d).weekday() == 6)  # first Sunday
    day = f"{year}-11-{fall_back:02d}"
    store = Store(db)
    try:
        notice_id = _open(store, config, local(year, 10, 30, 9, 0))
    finally:
        store.close()
    capsys.readouterr()
    serve = ["notices", "serve", notice_id, "--by", "Town clerk", "--config", str(path)]
    assert run_cli([*serve, "--on", f"{day}T01:30"]) == 2
    assert capsys.readouterr().err == (
        f"minewatch notices serve: --on: '{day}T01:30' occurs twice at the site, before and after the"
        f" clocks go back (America/Chicago); give its offset: {day}T01:30-05:00 (the first) or"
        f" {day}T01:30-06:00 (the second)\n"
    )
    store = Store(db)
    try:
        assert [c.change for c in NoticeBook(store).history(notice_id)] == ["opened"]
    finally:
        store.close()
    assert run_cli([*serve, "--on", f"{day}T01:30-06:00"]) == 0
    store = Store(db)
    try:
        [served] = [c for c in NoticeBook(store).history(notice_id) if c.change == "served"]
    finally:
        store.close()
    assert served.data["served"] == f"{day}T07:30:00Z"
