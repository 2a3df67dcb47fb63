"""`minewatch check-topics` against a real Mosquitto: the topics a daemon would never receive are named.

A message under a misspelt site or level reaches no subscription of the daemon's, so the broker
drops it and the daemon cannot even reject it; this command is how an installer finds such a
publisher. The publishers here run while the command listens (not retained), as sensors do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from monitor.wire.network_loop import stop_network_loop
from tests.support.cli import sigint_as_at_a_terminal
from tests.support.paths import REPO
from tests.support.servers import Mosquitto

DEMO_CONFIG = REPO / "sensors" / "demo" / "dovre-demo.toml"

GOOD = "minewatch/dovre-quarry/sensors/n1/levels"
UNKNOWN_SENSOR = "minewatch/dovre-quarry/sensors/n9/levels"
MISSPELT_SITE = "minewatch/dovre-qaurry/sensors/n1/levels"
WRONG_LEVEL = "minewatch/dovre-quarry/sensor/n2/levels"
# A right-to-left override in a hostile topic (Mosquitto refuses C0 and C1 controls in a topic,
# not this): shown spelt out, it cannot disguise the topic on the installer's terminal.
ESCAPES = "minewatch/x\u202e/sensors/n1/levels"
OUTPUT = "minewatch/dovre-quarry/findings"


def _config(tmp_path: Path, url: str, extra: str = "") -> Path:
    text = DEMO_CONFIG.read_text().replace('url = "mqtt://localhost:1883"', f'url = "{url}"{extra}')
    config = tmp_path / "site.toml"
    config.write_text(text)
    return config


def _check_topics(
    config: Path, *args: str, publishing: Sequence[str] = (), port: int = 0
) -> subprocess.CompletedProcess[str]:
    """The command as a real process; each topic of ``publishing`` published every 50 ms meanwhile."""
    stop = threading.Event()
    client = None
    if publishing:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="check-topics-test-publisher")
        client.connect("127.0.0.1", port)
        client.loop_start()

        def publisher() -> None:
            while not stop.is_set():
                for topic in publishing:
                    client.publish(topic, b'{"v": 1}', qos=1)
                stop.wait(0.05)

        threading.Thread(target=publisher, daemon=True).start()
    try:
        return subprocess.run(
            [sys.executable, "-m", "monitor.cli", "check-topics", "--config", str(config), *args],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop.set()
        if client is not None:
            stop_network_loop(client)
            client.disconnect()


def test_names_the_topics_the_daemon_never_receives(mosquitto: Mosquitto, tmp_path: Path) -> None:
    config = _config(tmp_path, mosquitto.url)
    topics = [GOOD, UNKNOWN_SENSOR, MISSPELT_SITE, WRONG_LEVEL, ESCAPES, OUTPUT]
    result = _check_topics(config, "--seconds", "3", publishing=topics, port=mosquitto.port)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "Traceback" not in result.stderr
    unread, rejected = (
        out.split("received and rejected on their topic")[0],
        out.split("received and rejected")[1],
    )
    assert "never received by the daemon (the broker drops them: not even rejected): 3 topics" in unread
    assert (
        f"  {MISSPELT_SITE} (" in unread
        and "site dovre-qaurry is not configured (did you mean dovre-quarry?)" in unread
    )
    assert (
        f"  {WRONG_LEVEL} (" in unread
        and "level sensor is not one of sensors, events (did you mean sensors?)" in unread
    )
    # The hostile topic is shown with its escape spelled out, never sent to the terminal.
    assert "minewatch/x\\u202e/sensors/n1/levels" in unread and "\u202e" not in out
    assert f"  {UNKNOWN_SENSOR} (" in rejected
    assert "topic: sensor n9: not configured for site dovre-quarry" in rejected
    assert (
        "\nreceived: 1 topic," in out and f"  {GOOD} (" not in out
    )  # received topics are counted, not listed
    assert "the daemon's own outputs: 1 topic," in out


def test_only_good_topics_exit_zero(mosquitto: Mosquitto, tmp_path: Path) -> None:
    config = _config(tmp_path, mosquitto.url)
    result = _check_topics(config, "--seconds", "2", publishing=[GOOD], port=mosquitto.port)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "never received" not in result.stdout and "\nreceived: 1 topic," in result.stdout


def test_nothing_published_is_its_own_answer(mosquitto: Mosquitto, tmp_path: Path) -> None:
    result = _check_topics(_config(tmp_path, mosquitto.url), "--seconds", "0.5")
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "nothing was published under minewatch/ meanwhile, or this account may not read it" in result.stdout
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--seconds", "0"], "argument --seconds: must be more than 0 s, got 0"),
        (["--seconds", "soon"], "argument --seconds: expected a number, got 'soon'"),
        (["--password-file", "p.txt"], "--password-file needs --username"),
        (["--username", "minewatch-daemon"], "is the daemon's account (broker.username)"),
    ],
)
def test_a_users_mistake_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    config = _config(tmp_path, "mqtt://127.0.0.1:9", '\nusername = "minewatch-daemon"')
    result = _check_topics(config, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert expected in lines[0]


def test_an_unreachable_broker_is_one_line(tmp_path: Path) -> None:
    result = _check_topics(_config(tmp_path, "mqtt://127.0.0.1:9"), "--seconds", "1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "minewatch check-topics: cannot reach the broker: mqtt://127.0.0.1:9:"
        " connection refused: nothing listens on 127.0.0.1:9"
    )


def test_ctrl_c_reports_what_was_heard_over_the_time_it_listened(tmp_path: Path) -> None:
    """Stopped early with Ctrl-C, the report says how long it listened, not the --seconds asked.

    The broker publishes its subscription count each second ($SYS), so SIGINT is sent once the
    command's subscription is in place."""
    broker = Mosquitto(tmp_path / "broker", extra_conf="sys_interval 1\n").start()
    watcher = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="check-topics-test-watcher")
    subscriptions: list[int] = []
    seen = threading.Condition()

    def on_count(c: mqtt.Client, u: object, message: mqtt.MQTTMessage) -> None:
        with seen:
            subscriptions.append(int(message.payload))
            seen.notify_all()

    watcher.on_message = on_count
    watcher.connect("127.0.0.1", broker.port)
    watcher.subscribe("$SYS/broker/subscriptions/count")
    watcher.loop_start()
    try:
        with seen:
            assert seen.wait_for(lambda: subscriptions, timeout=10)
            before = subscriptions[-1]
        config = _config(tmp_path, broker.url)
        argv = ["-m", "monitor.cli", "check-topics", "--config", str(config), "--seconds", "600"]
        with sigint_as_at_a_terminal():
            command = subprocess.Popen(
                [sys.executable, *argv],
                env=dict(os.environ, PYTHONPATH=str(REPO)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        with seen:
            assert seen.wait_for(lambda: subscriptions[-1] > before, timeout=30)
        command.send_signal(signal.SIGINT)
        out, err = command.communicate(timeout=30)
    finally:
        stop_network_loop(watcher)
        watcher.disconnect()
        broker.stop()
    first = out.splitlines()[0]
    assert "Traceback" not in err, err
    assert first.startswith("listened ") and "s of 600 (stopped with Ctrl-C) to minewatch/#" in first, out
    assert float(first.split()[1]) < 60, first


def test_a_broker_refusing_an_anonymous_login_asks_for_an_account(tmp_path: Path) -> None:
    """Without --username it said "check --username and --password-file", options not given."""
    passwords = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), "town", "secret"], check=True)
    broker = Mosquitto(tmp_path / "broker", extra_conf=f"allow_anonymous false\npassword_file {passwords}\n")
    broker.start()
    try:
        result = _check_topics(_config(tmp_path, broker.url), "--seconds", "1")
    finally:
        broker.stop()
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (
        f"minewatch check-topics: {broker.url} refused an anonymous login (Not authorized): give"
        " --username NAME --password-file FILE, an account that may read minewatch/#\n"
    )
