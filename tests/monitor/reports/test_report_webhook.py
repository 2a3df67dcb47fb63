"""A report sent to the Town's webhooks (monitor/notify/delivery.py, ``report_attachments``)
against a real local HTTP receiver: the body carries the report's facts and digests and, within
the channel's ``attach_max_bytes``, the PDF and CSV themselves (base64), covered by the HMAC
signature; a file over the cap is named with its digest and the reason it was left out. The
receiver's decoded PDF verifies against the store (`minewatch verify`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sqlite3
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.cli import main
from monitor.config import Config, load_config
from monitor.evidence.disclosure import READER_ALERT_DATA
from monitor.journal.store import Store
from monitor.notify.delivery import Deliveries
from monitor.reports.content import Report, build_report, period_of
from monitor.reports.formats import render_csv, render_pdf
from monitor.reports.sending import send_report
from tests.support.notices import CONFIG, add_sample_sound, local, site_and_profile
from tests.support.report_alerts import report_alert_as_before
from tests.support.servers import free_port
from tests.support.webhook import Hook

SECRET = "town-hook-secret"
RECIPIENTS = """
[[recipients]]
name = "Town webhook"
role = "town"
[[recipients.channels]]
type = "webhook"
url = "{url}/whole"
secret = "{secret}"

[[recipients]]
name = "Town small webhook"
role = "town"
[[recipients.channels]]
type = "webhook"
url = "{url}/small"
attach_max_bytes = {small}
"""


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook(free_port()).start()
    yield server
    server.stop()


def _report_to_send(tmp_path: Path, hook: Hook) -> tuple[Path, Config, Store, Report, bytes, bytes, Path]:
    """A day's report of sample sound as files in ``tmp_path``, a store and the configuration
    with the two Town webhooks (the small one's cap admits the PDF, not the CSV as well)."""
    db = tmp_path / "store.db"
    day = local(2026, 6, 15, 11)
    store = Store(db)
    add_sample_sound(store, day, day + timedelta(minutes=20), (day, day + timedelta(minutes=5)))
    config_path = tmp_path / "minewatch.toml"
    base = f"http://127.0.0.1:{hook.port}"
    config_path.write_text(CONFIG.format(db=db, max_attempts=3))
    config = load_config(config_path, secrets="defer")
    site, profile = site_and_profile(config)
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    period = period_of(date(2026, 6, 15), date(2026, 6, 15), ZoneInfo(site.timezone), "2026-06-15")
    report = build_report(conn, site, profile, period, day)
    conn.close()
    pdf, csv = render_pdf(report), render_csv(report)
    assert len(pdf) < len(csv)  # the small channel's cap admits the PDF (first), not the CSV as well
    config_path.write_text(
        CONFIG.format(db=db, max_attempts=3) + RECIPIENTS.format(url=base, secret=SECRET, small=len(pdf) + 10)
    )
    config = load_config(config_path)
    pdf_path, csv_path = tmp_path / "quarry-2026-06-15.pdf", tmp_path / "quarry-2026-06-15.csv"
    pdf_path.write_bytes(pdf)
    csv_path.write_bytes(csv)
    return config_path, config, store, report, pdf, csv, pdf_path


def test_a_sent_report_reaches_the_webhook_with_its_files(
    tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path, config, store, report, pdf, csv, pdf_path = _report_to_send(tmp_path, hook)
    day = local(2026, 6, 15, 11)
    sent = send_report(config, store, report, pdf, csv, str(pdf_path), day + timedelta(hours=1))
    store.close()
    assert (sent["queued"], sent["delivered"]) == (2, 2)

    bodies = {json.loads(body)["recipient"]: (headers, body) for headers, body in hook.accepted()}
    bodies["whole"], bodies["small"] = bodies.pop("Town webhook"), bodies.pop("Town small webhook")
    whole_headers, whole = bodies["whole"]
    expected = "sha256=" + hmac.new(SECRET.encode(), whole, hashlib.sha256).hexdigest()
    assert whole_headers["x-minewatch-signature"] == expected  # the signature covers the files
    document = json.loads(whole)
    data = document["alert"]["data"]
    # The alert names the report and its files' digests, not where the operator keeps the files.
    assert set(data) <= READER_ALERT_DATA["report"], sorted(data)
    assert str(tmp_path) not in whole.decode() and str(tmp_path) not in bodies["small"][1].decode()
    assert document["alert"]["kind"] == "report" and data["report_id"] == sent["id"]
    assert data["chain_seq"] == report.chain_seq and data["chain_head"] == report.chain_head
    files = {a["media_type"]: a for a in document["attachments"]}
    assert set(files) == {"application/pdf", "text/csv"}
    assert base64.b64decode(files["application/pdf"]["content_base64"]) == pdf
    assert base64.b64decode(files["text/csv"]["content_base64"]) == csv
    assert files["application/pdf"]["sha256"] == hashlib.sha256(pdf).hexdigest() == data["report_pdf_sha256"]
    assert files["text/csv"]["sha256"] == hashlib.sha256(csv).hexdigest() == data["report_csv_sha256"]
    assert files["application/pdf"]["filename"] == pdf_path.name and files["application/pdf"]["bytes"] == len(
        pdf
    )

    small_headers, small = bodies["small"]
    assert "x-minewatch-signature" not in small_headers  # no secret on that channel
    small_files = {a["media_type"]: a for a in json.loads(small)["attachments"]}
    assert base64.b64decode(small_files["application/pdf"]["content_base64"]) == pdf
    assert "content_base64" not in small_files["text/csv"]
    assert (
        small_files["text/csv"]["omitted"] == f"larger than the channel's attach_max_bytes ({len(pdf) + 10})"
    )
    assert small_files["text/csv"]["sha256"] == hashlib.sha256(csv).hexdigest()
    assert small_files["text/csv"]["bytes"] == len(csv)

    # What the Town's receiver wrote down verifies against the chain.
    received = tmp_path / "received.pdf"
    received.write_bytes(base64.b64decode(files["application/pdf"]["content_base64"]))
    code = main(["verify", "--config", str(config_path), str(received)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and len(out) == 3 and all(": OK: " in line for line in out), out


def test_a_report_alert_queued_naming_its_files_paths_goes_with_its_files_and_not_the_paths(
    tmp_path: Path, hook: Hook
) -> None:
    """A store written before the alert stopped naming the files' paths holds its report alert
    queued with them (its copy for each webhook not yet delivered). Opened by this minewatch,
    the copies lose the paths (the migration deliveries-report-copies-without-paths) and go
    under a key of their own, each with the report's files, found through the report's row."""
    _, config, store, report, pdf, csv, pdf_path = _report_to_send(tmp_path, hook)
    made = local(2026, 6, 16, 6)
    deliveries = Deliveries(store.conn, config)
    with store.batch():
        alert = report_alert_as_before(
            store, report.period.start, report.period.end, made, pdf, csv, str(pdf_path), ["Town webhook"]
        )
        assert deliveries.enqueue(alert, made) == 2
    queued = {r["id"] for r in deliveries.rows()}
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-report-copies-without-paths'")
    store.close()

    conn = sqlite3.connect(config.storage.path)
    sender = Deliveries(conn, config)  # the store opened by this minewatch
    assert all(str(tmp_path) not in r["alert"] for r in sender.rows())
    assert sender.deliver_due(made) == 2
    conn.close()
    for headers, body, _status in hook.received:
        assert str(tmp_path) not in body.decode()
        key = headers["idempotency-key"]
        assert key not in queued and key.rsplit("-", 1)[0] in queued  # <id>-<8 hex of the copy's SHA-256>
        files = {a["media_type"]: a for a in json.loads(body)["attachments"]}
        assert base64.b64decode(files["application/pdf"]["content_base64"]) == pdf
        assert files["application/pdf"]["filename"] == pdf_path.name
        assert files["text/csv"]["sha256"] == hashlib.sha256(csv).hexdigest()
    assert len(hook.received) == 2
