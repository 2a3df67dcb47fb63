"""The inspector's CSV of a chosen window and sound meters (issue 26), from the evidence page in
Chromium against the real daemon, broker and store (tests/monitor/portal/conftest.py): every
stored second as the store holds it, columns and units named in the header, streamed; within
the account's sites and time scope; a sensor that is not one of the site's meters is refused."""

from __future__ import annotations

import csv
import io
import sqlite3
from datetime import timedelta
from pathlib import Path

from playwright.sync_api import BrowserContext

from monitor.wire.codec import encode
from rules.model import SoundLevels
from tests.monitor.portal.conftest import DAY, SITE, Env, local, login
from tests.support.daemon import wait_until

HEADER = [
    "sensor",
    "time_utc",
    "time_local (America/Chicago)",
    "duration (s)",
    "LAeq (dB(A))",
    "LAFmax (dB(A))",
    "LASmax (dB(A))",
    "LAFmin (dB(A))",
    "LCeq (dB(C))",
    "LCpeak (dB(C))",
    "LZpeak (dB(Z))",
    "LZeq (dB(Z))",
    "source",
    "overload",
]


def _stored(env: Env, sensors: tuple[str, ...], start_us: int, end_us: int) -> list[tuple[str, int, float]]:
    conn = sqlite3.connect(env.store)
    try:
        marks = ",".join("?" * len(sensors))
        return conn.execute(
            f"SELECT sensor, ts_us, LAeq FROM sound WHERE site = ? AND sensor IN ({marks})"
            " AND ts_us >= ? AND ts_us < ? ORDER BY ts_us, sensor",
            (SITE, *sensors, start_us, end_us),
        ).fetchall()
    finally:
        conn.close()


def test_the_inspector_downloads_the_chosen_meters_over_a_window(
    env: Env, context: BrowserContext, tmp_path: Path
) -> None:
    page = login(context, env, "insp")
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    form = page.locator("#form-csv")
    assert [c.get_attribute("value") for c in form.locator("input[name=sensor]").all()] == ["n1", "n2"]
    form.locator("input[name=from]").fill(f"{DAY.isoformat()}T09:00")
    form.locator("input[name=to]").fill(f"{DAY.isoformat()}T09:02")
    form.locator("input[name=sensor][value=n2]").uncheck()
    with page.expect_download() as info:
        form.locator("button[type=submit]").click()
    assert info.value.suggested_filename == f"sound-{SITE}-{local(9).date().isoformat()}.csv"
    saved = tmp_path / "n1.csv"
    info.value.save_as(saved)
    rows = list(csv.reader(io.StringIO(saved.read_text())))
    assert rows[0] == HEADER
    start_us, end_us = int(local(9).timestamp() * 1e6), int(local(9, 2).timestamp() * 1e6)
    stored = _stored(env, ("n1",), start_us, end_us)
    assert len(stored) == 120 and len(rows) == 121
    assert [(r[0], float(r[4])) for r in rows[1:]] == [(s, laeq) for s, _, laeq in stored]
    # Times in UTC and in site time (the bundle's cells), the levels as stored.
    assert rows[1][:4] == [
        "n1",
        local(9).strftime("%Y-%m-%dT%H:%M:%SZ"),
        f"{DAY.isoformat()}T09:00:00-06:00",
        "1.0",
    ]
    # (conftest.levels: LAFmax +1.5, LASmax +1, LCpeak +15, LZpeak +18; the others not measured)
    conn = sqlite3.connect(env.store)
    source = conn.execute(
        "SELECT source FROM sound WHERE site = ? AND sensor = 'n1' AND ts_us = ?", (SITE, start_us)
    ).fetchone()[0]
    conn.close()
    assert rows[1][4:] == ["58.0", "59.5", "59.0", "", "", "73.0", "76.0", "", source, ""]
    assert rows[2][4] == "58.3"

    # Both meters: every second of each, in time order; streamed (no length known beforehand).
    url = f"{env.url}/sites/{SITE}/evidence/sound.csv?from={DAY}T09:00&to={DAY}T09:02&sensor=n1&sensor=n2"
    reply = context.request.get(url)
    assert reply.status == 200 and reply.headers["content-type"] == "text/csv; charset=utf-8"
    assert reply.headers.get("transfer-encoding") == "chunked" and "content-length" not in reply.headers
    both = list(csv.reader(io.StringIO(reply.text())))
    assert both[0] == HEADER
    assert [(r[0], float(r[4])) for r in both[1:]] == [
        (s, laeq) for s, _, laeq in _stored(env, ("n1", "n2"), start_us, end_us)
    ]
    assert {r[0] for r in both[1:]} == {"n1", "n2"} and len(both) == 241

    # A sensor that is not one of the site's meters, none at all, or a window backwards: refused
    # on the form, saying which field and what to do.
    for query, said in (
        ("sensor=n1&sensor=wx", "sensor: wx is not a sound meter of quarry; choose from n1, n2"),
        ("sensor=zz", "sensor: zz is not a sound meter of quarry; choose from n1, n2"),
        ("", "sensor: choose one or more of the site's sound meters (n1, n2)"),
    ):
        page.goto(f"{env.url}/sites/{SITE}/evidence/sound.csv?from={DAY}T09:00&to={DAY}T09:02&{query}")
        assert page.inner_text("#evidence-error") == said
    page.goto(f"{env.url}/sites/{SITE}/evidence/sound.csv?from={DAY}T10:00&to={DAY}T09:00&sensor=n1")
    assert page.inner_text("#evidence-error") == "to: must be after from"
    # Before the inspector's time scope (not_before: the day before DAY): nothing there to see.
    early = DAY - timedelta(days=3)
    assert (
        context.request.get(
            f"{env.url}/sites/{SITE}/evidence/sound.csv?from={early}T09:00&to={early}T10:00&sensor=n1"
        ).status
        == 404
    )
    # Each download is on the record, with what it held.
    assert (
        env.count(
            "SELECT COUNT(*) FROM portal_actions WHERE action = 'sound_csv_downloaded' AND actor = 'insp'"
            " AND json_extract(data, '$.sensors') = '[\"n1\"]'"
        )
        == 1
    )
    context.clear_cookies()
    login(context, env, "op")
    assert context.request.get(url, max_redirects=0).status == 403


def test_a_second_the_meter_was_overloaded_in_says_so_in_its_last_cell(
    env: Env, context: BrowserContext, tmp_path: Path
) -> None:
    """A clipped second reads low (IEC 61672-1 5.11): the CSV gave its 95 dB(A) as a plain level,
    with nothing to say it is at least that. Sent by MQTT with "overload": true, as a meter sends it."""
    start = local(13)
    for s in range(6):
        levels = SoundLevels(
            SITE, "n1", start + timedelta(seconds=s), 1.0, 95.0, 96.0, 110.0, overload=s in (2, 3)
        )
        env.pub.publish(*encode(levels))
    assert wait_until(
        lambda: (
            env.count(
                "SELECT COUNT(*) FROM sound WHERE sensor = 'n1' AND ts_us >= ?", int(start.timestamp() * 1e6)
            )
            == 6
        ),
        30,
    ), env.daemon.logs()
    page = login(context, env, "insp")
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    form = page.locator("#form-csv")
    form.locator("input[name=from]").fill(f"{DAY.isoformat()}T13:00")
    form.locator("input[name=to]").fill(f"{DAY.isoformat()}T13:01")
    form.locator("input[name=sensor][value=n2]").uncheck()
    with page.expect_download() as info:
        form.locator("button[type=submit]").click()
    saved = tmp_path / "overloaded.csv"
    info.value.save_as(saved)
    rows = list(csv.reader(io.StringIO(saved.read_text())))
    # The columns readers parse keep their places; the flag comes last, as in the bundle.
    assert rows[0] == HEADER and rows[0][-1] == "overload"
    assert [(r[1], r[4], r[-1]) for r in rows[1:]] == [
        ((start + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ"), "95.0", "1" if s in (2, 3) else "")
        for s in range(6)
    ]


def test_a_head_request_records_no_download_and_reads_nothing(tmp_path: Path) -> None:
    """A HEAD for the CSV (a link checker's) read every second of the window to throw it away and
    recorded sound_csv_downloaded though nothing went out; it answers the headers only. A GET
    is recorded as before. (The harness's own `minewatch serve` over an empty store.)"""
    from tests.support.portal_server import Client, Portal, serving

    with serving(Portal(tmp_path)) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        url = "/sites/s1/evidence/sound.csv?from=2026-12-01&to=2026-12-02&sensor=n1"
        head = bob.request("HEAD", url)
        assert head.status == 200 and head.raw == b"" and "content-length" not in head.headers
        assert head.headers["content-type"] == "text/csv; charset=utf-8"
        assert head.headers["content-disposition"] == 'attachment; filename="sound-s1-2026-12-01.csv"'
        assert portal.actions("sound_csv_downloaded") == []
        got = bob.get(url)
        assert got.status == 200 and got.body.startswith("sensor,time_utc,")
        assert [a["target"] for a in portal.actions("sound_csv_downloaded")] == ["n1"]
