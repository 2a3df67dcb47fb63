"""`minewatch status` tells the outputs' backlogs: each site's deliveries (pending, failing with
the last error, undeliverable) and the InfluxDB outbox (points queued, the oldest, rejected).
A webhook's URL is shown without its token, as everywhere else (monitor/shown_url.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import parse_config
from monitor.influx.outbox import Outbox
from monitor.journal.store import Store
from monitor.notify.delivery import Deliveries
from monitor.shown_url import shown_url
from tests.support.notices import CONFIG
from tests.support.servers import free_port
from tests.support.webhook import Hook

T0 = datetime(2026, 6, 15, 16, 40, tzinfo=UTC)
SECRET = "SECRET-town-51ac"

RECIPIENTS = """
[[recipients]]
name = "Town clerk"
role = "town"
[[recipients.channels]]
type = "webhook"
url = "{url}?token={secret}"
"""


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook(free_port()).start()
    yield server
    server.stop()


def test_status_tells_failing_deliveries_and_the_influx_backlog(
    tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        CONFIG.format(db=tmp_path / "minewatch.db", max_attempts=5)
        + RECIPIENTS.format(url=hook.url, secret=SECRET)
    )
    config = parse_config(path.read_text(), str(path))
    store = Store(config.storage.path)
    deliveries = Deliveries(store.conn, config)
    for alert_id in ("a1", "a2"):
        body = {
            "id": alert_id,
            "site": "quarry",
            "ts": "2026-06-15T16:40:00Z",
            "audiences": ["town"],
            "kind": "violation",
            "severity": "violation",
            "condition": alert_id,
            "message": "loud",
            "data": {},
        }
        deliveries.enqueue(body, T0)
    hook.statuses = [503]
    assert deliveries.deliver_due(T0, alert_id="a1") == 0  # a1 fails once; a2 waits its turn
    outbox = Outbox(store.conn)
    outbox.put(["sound,site=quarry LAeq=50 1", "sound,site=quarry LAeq=51 2", "bad line"])
    [*_, (bad, _)] = outbox.peek(10)
    outbox.reject([bad], "unable to parse 'bad line'")
    store.close()

    at = ["--at", "2026-06-15T16:41:00Z"]
    assert main(["status", "--config", str(path), "--format", "json", *at]) == 0
    printed = capsys.readouterr().out
    [status] = json.loads(printed)
    shown = shown_url(f"{hook.url}?token={SECRET}")
    [failure] = status["deliveries"].pop("failures")
    assert status["deliveries"] == {"pending": 2, "failing": 1, "undeliverable_24h": 0}
    assert failure["recipient"] == "Town clerk" and failure["target"] == shown
    assert failure["attempts"] == 1 and failure["next_try"] == "2026-06-15T16:40:02Z"
    assert failure["last_error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"
    assert failure["sending"] is None
    oldest = status["influx_outbox"].pop("oldest_queued")
    assert status["influx_outbox"] == {"queued": 2, "rejected": 1}
    assert abs(datetime.fromisoformat(oldest) - datetime.now(UTC)) < timedelta(minutes=5)

    assert main(["status", "--config", str(path), *at]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert f"InfluxDB outbox: 2 point(s) queued, the oldest since {oldest}; 1 point(s) rejected" in lines
    assert "  deliveries: 2 pending, 1 of them failing, 0 undeliverable in the last 24 h" in lines
    assert (
        f"  - Town clerk by webhook ({shown}): 1 attempt(s), next try 2026-06-15 11:40:02 CDT:"
        f" webhook {shown!r} answered HTTP 503 Service Unavailable"
    ) in lines
    assert SECRET not in printed + text
