"""The harness itself: real mosquitto and influxd start, answer, and stop."""

from __future__ import annotations

import threading
import time
import urllib.request

import paho.mqtt.client as mqtt

from monitor.wire.network_loop import stop_network_loop
from tests.support.servers import Influxd, Mosquitto


def test_mosquitto_round_trip(mosquitto: Mosquitto) -> None:
    received: list[bytes] = []
    got = threading.Event()

    def on_message(client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        received.append(message.payload)
        got.set()

    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="t-sub", protocol=mqtt.MQTTv5)
    sub.on_message = on_message
    sub.connect("127.0.0.1", mosquitto.port)
    sub.subscribe("minewatch/#", qos=1)
    sub.loop_start()
    time.sleep(0.2)
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="t-pub", protocol=mqtt.MQTTv5)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    pub.publish("minewatch/s/sensors/n1/levels", b"hello", qos=1).wait_for_publish(5)
    assert got.wait(5)
    assert received == [b"hello"]
    for c in (pub, sub):
        stop_network_loop(c)
        c.disconnect()
    assert mosquitto.port not in (1883, 8883)


def test_influxd_write_and_query(influxd: Influxd) -> None:
    influxd.create_database("t")
    body = b"sound,site=s,sensor=n1 LAeq=71.5 1781510400000000000\n"
    req = urllib.request.Request(f"{influxd.url}/write?db=t&precision=ns", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 204
    series = influxd.query('SELECT "LAeq" FROM "sound"', "t")
    assert series[0]["values"] == [["2026-06-15T08:00:00Z", 71.5]]
    assert influxd.port != 8086


def test_servers_stop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = Mosquitto(tmp_path / "m").start()
    broker.stop()
    assert broker.proc is None
    server = Influxd(tmp_path / "i").start()
    server.stop()
    assert server.proc is None
