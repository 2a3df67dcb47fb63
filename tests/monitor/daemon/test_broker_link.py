"""The broker link: every failed connection logged with its reason and the next attempt, the
link's state in `minewatch status`, a refused login ends the daemon, fast reconnects after a
broker restart. Against real Mosquitto brokers (tests/support/servers.py, tests/support/secure_broker.py)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.config import BrokerConfig
from monitor.daemon.ingest import Handoff, MqttLink
from monitor.wire.link_state import Backoff, LinkState
from tests.support.cli import run_minewatch
from tests.support.daemon import Daemon, wait_until, write_config
from tests.support.secure_broker import EXTRA_ARGS, run_secure_broker, write_test_config
from tests.support.sensors import site_config
from tests.support.servers import Mosquitto, free_port

pytestmark = pytest.mark.timeout(180)

ATTEMPT = re.compile(r"Broker (\S+): (.+); next attempt in ([0-9.]+) s \(at (\d\d:\d\d:\d\d\.\dZ)\)")


# --------------------------------------------------------------------------- the policy (pure)


def test_backoff_is_fast_for_a_broker_that_was_up_a_moment_ago_then_slower() -> None:
    now = [0.0]
    backoff = Backoff(clock=lambda: now[0], jitter=lambda: 0.0)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    now[0] = 301.0  # down for longer than the fast window: one attempt every 30 s at most
    assert [backoff.next_delay() for _ in range(4)] == [10.0, 20.0, 30.0, 30.0]
    backoff.up()  # connected again: the next outage starts from the first delay
    assert backoff.next_delay() == 0.5


def test_backoff_jitter_only_shortens_a_delay() -> None:
    backoff = Backoff(clock=lambda: 0.0, jitter=lambda: 1.0)
    assert backoff.next_delay() == pytest.approx(0.4)


def test_link_state_round_trips_and_reads_as_one_line() -> None:
    from datetime import UTC, datetime, timedelta

    since = datetime(2026, 6, 15, 12, 0, 5, tzinfo=UTC)
    state = LinkState(False, since, "connection refused", "mqtt://b:1883", since + timedelta(seconds=10))
    assert LinkState.from_json(state.to_json()) == state
    assert LinkState.from_json("not json") is None
    line = state.describe(since + timedelta(seconds=30))
    assert line == "broker mqtt://b:1883: not connected since 2026-06-15 12:00:05Z (connection refused)"
    stale = state.describe(since + timedelta(hours=1))
    assert stale.endswith("; the daemon last reported at 2026-06-15 12:00:15Z")


# --------------------------------------------------------------------------- reasons, in process


def _watch_reasons(
    config: BrokerConfig, caplog: pytest.LogCaptureFixture, attempts: int = 2
) -> tuple[LinkState, list[tuple[str, str, float]]]:
    """Start an MqttLink, wait for ``attempts`` failed attempts; its state then and the logged lines."""
    link = MqttLink(config, ["x/#"], Handoff(10))
    with caplog.at_level(logging.WARNING, logger="minewatch.ingest"):
        link.start()
        try:
            assert wait_until(lambda: link.watch.attempts >= attempts, timeout=20, interval=0.05)
            state = link.watch.state
        finally:
            link.close()
    lines = [m.groups() for r in caplog.records if (m := ATTEMPT.search(r.getMessage()))]
    return state, [(url, reason, float(delay)) for url, reason, delay, _ in lines]


def test_refused_port_is_logged_with_its_reason_and_the_next_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()  # nothing listens there
    state, lines = _watch_reasons(BrokerConfig(url=f"mqtt://127.0.0.1:{port}", client_id="t-refused"), caplog)
    assert len(lines) >= 2, caplog.text
    assert all(reason == f"connection refused: nothing listens on 127.0.0.1:{port}" for _, reason, _ in lines)
    # The first retry is quick (a broker restarting is back within a second or two).
    assert 0.3 <= lines[0][2] <= 0.5 and lines[1][2] <= 1.0
    assert not state.connected and state.reason.startswith("connection refused")


def test_unresolvable_host_is_named(caplog: pytest.LogCaptureFixture) -> None:
    _, lines = _watch_reasons(
        BrokerConfig(url="mqtt://no-such-broker.invalid:1883", client_id="t-dns"), caplog, attempts=1
    )
    assert lines and lines[0][1].startswith("host name 'no-such-broker.invalid' not resolved"), lines


def test_tls_to_a_plain_listener_is_a_tls_failure(
    caplog: pytest.LogCaptureFixture, mosquitto: Mosquitto
) -> None:
    _, lines = _watch_reasons(
        BrokerConfig(url=f"mqtts://127.0.0.1:{mosquitto.port}", client_id="t-tls"), caplog, attempts=1
    )
    assert lines and lines[0][1].startswith("TLS"), lines


def test_untrusted_certificate_is_a_tls_failure(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    config = write_test_config(tmp_path / "minewatch.toml")
    with run_secure_broker(config, tmp_path / "broker", EXTRA_ARGS) as broker:
        # The system's CAs, not the broker's own: its certificate cannot be verified.
        _, lines = _watch_reasons(
            BrokerConfig(url=broker.url, client_id="t-ca", username="minewatch-daemon"), caplog, attempts=1
        )
    assert lines and lines[0][1].startswith("TLS: the broker's certificate is not trusted"), lines


# --------------------------------------------------------------------------- the daemon process


def test_daemon_against_an_unreachable_broker_logs_and_status_says_not_connected(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "minewatch.toml", f"mqtt://127.0.0.1:{port}")
    daemon = Daemon(config).start()
    try:
        assert wait_until(lambda: len(ATTEMPT.findall(daemon.logs())) >= 3, timeout=60), daemon.logs()
        status = _status(config)
    finally:
        assert daemon.stop() == 0
    found = ATTEMPT.findall(daemon.logs())
    assert found[0][1] == f"connection refused: nothing listens on 127.0.0.1:{port}"
    assert f"broker mqtt://127.0.0.1:{port}: not connected since " in status
    assert "(connection refused: nothing listens on" in status


def test_wrong_password_ends_the_daemon_with_one_line_and_status_3(tmp_path: Path) -> None:
    site = write_test_config(tmp_path / "site.toml")
    with run_secure_broker(site, tmp_path / "broker", EXTRA_ARGS) as broker:
        wrong = tmp_path / "wrong-password"
        wrong.write_text("not-the-password\n")
        toml = broker.broker_toml().replace(str(broker.password_file("minewatch-daemon")), str(wrong))
        config = tmp_path / "minewatch.toml"
        config.write_text(toml + f'[storage]\npath = "{tmp_path / "store.db"}"\n' + _sites(site))
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        # The edge publisher with its own account and a wrong password: the same, its queue kept.
        sensor_toml = broker.broker_toml("sensor-north-n1", "sensor-north-n1")
        sensor_toml = sensor_toml.replace(str(broker.password_file("sensor-north-n1")), str(wrong))
        sensor_config = tmp_path / "sensor.toml"
        sensor_config.write_text(sensor_toml + _sites(site))
        sensor = subprocess.run(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(sensor_config)),
                *("--sensor", "n1", "--site", "north", "--source", "synthetic:60"),
                *("--queue", str(tmp_path / "n1.queue.db"), "--drain-timeout", "30"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert sensor.returncode == 3, sensor.stderr
    assert re.match(
        f"minewatch sensor sound: the broker {re.escape(broker.url)}"
        " refused the login of user 'sensor-north-n1'",
        sensor.stderr.strip().splitlines()[-1],
    ), sensor.stderr
    assert "still queued" in sensor.stderr
    assert result.returncode == 3, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    # Mosquitto 2.0 answers a wrong password with "not authorized" (0x87); others with 0x86.
    assert re.fullmatch(
        f"minewatch run: the broker {re.escape(broker.url)} refused the login of user 'minewatch-daemon':"
        r" (bad user name or password|not authorized)"
        r" \(check broker.username and its password; not retried\)",
        last,
    ), result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("refused the login") == 2  # the log line and the exit line: no retries
    assert time.monotonic() - started < 60


def _sites(site_toml: Path) -> str:
    text = site_toml.read_text()
    return text[text.index("[[sites]]") :]


def _status(config: Path) -> str:
    result = run_minewatch("status", "--config", config, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_broker_restart_daemon_and_sensor_reconnect_quickly(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """After the broker comes back both are connected again within seconds, and status says
    "not connected since" while it is away."""
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    daemon = Daemon(config).start()
    (tmp_path / "sensor").mkdir()
    sensor_config = site_config(tmp_path / "sensor", mosquitto.url)
    sensor_log = (tmp_path / "sensor.log").open("wb")
    sensor = subprocess.Popen(
        [
            *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(sensor_config)),
            *("--sensor", "n1", "--source", "synthetic:60", "--queue", str(tmp_path / "n1.queue.db")),
            *("--drain-timeout", "1"),
        ],
        stdout=sensor_log,
        stderr=sensor_log,
    )

    def sensor_logs() -> str:
        return (tmp_path / "sensor.log").read_text(errors="replace")

    try:
        daemon.wait_ready(timeout=60)
        assert wait_until(lambda: "Connected to" in sensor_logs(), timeout=60), sensor_logs()
        assert "connected since" in _status(config)
        mosquitto.stop()
        assert wait_until(lambda: "not connected since" in _status(config), timeout=30)
        status = _status(config)
        assert "(connection lost" in status or "(connection refused" in status, status
        time.sleep(3)  # a few failed attempts while it is away
        mosquitto.start()
        back = time.monotonic()
        assert wait_until(lambda: daemon.logs().count("Connected to") >= 2, timeout=30, interval=0.05)
        assert wait_until(lambda: sensor_logs().count("Connected to") >= 2, timeout=30, interval=0.05)
        took = time.monotonic() - back
        assert took < 5, f"reconnected {took:.1f} s after the broker came back"
        assert wait_until(lambda: "broker " in _status(config) and "not connected" not in _status(config), 15)
    finally:
        sensor.terminate()
        sensor.wait(60)
        sensor_log.close()
        daemon.stop()
    # Every attempt while it was away was logged, by both, with a reason and the next attempt.
    assert len(ATTEMPT.findall(daemon.logs())) >= 3, daemon.logs()
    assert len(ATTEMPT.findall(sensor_logs())) >= 3, sensor_logs()
