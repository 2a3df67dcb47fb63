"""Stopping paho's network thread when the thread ends on its own inside ``loop_stop``.

CI failed once on this race (a test's teardown, against nats-server): the client's thread
cleared ``client._thread`` on its way out between ``loop_stop``'s check and its join
(eclipse-paho/paho.mqtt.python#872). Here the race is made certain, as that issue's
reproduction does with a sleep: ``loop_stop`` calls ``threading.current_thread`` between the
two, and the ``threading`` that paho's client module sees is swapped for one whose
``current_thread`` first waits until the network thread has ended. The client and the broker
(Mosquitto) are real.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import paho.mqtt.client as mqtt
import pytest

from monitor.wire.network_loop import stop_network_loop
from tests.support.servers import Mosquitto


class _ThreadingAsPahoSeesIt:
    """The ``threading`` module, but ``current_thread`` first waits for ``thread`` to end."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread

    def __getattr__(self, name: str) -> object:
        return getattr(threading, name)

    def current_thread(self) -> threading.Thread:
        me = threading.current_thread()
        if me is not self.thread:
            # loop_stop has set _thread_terminate: the loop returns within its 1 s select and
            # the thread clears client._thread on its way out.
            self.thread.join(10)
        return me


@pytest.fixture
def ending(mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch) -> Iterator[mqtt.Client]:
    """A connected client whose network thread will end inside its next ``loop_stop``."""
    connected = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="loop-race", protocol=mqtt.MQTTv5)
    client.on_connect = lambda *args: connected.set()
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    assert connected.wait(5), "no CONNACK"
    thread = client._thread
    assert thread is not None
    monkeypatch.setattr(mqtt, "threading", _ThreadingAsPahoSeesIt(thread))
    yield client
    thread.join(10)
    client.disconnect()


def test_paho_alone_fails_when_the_thread_ends_inside_loop_stop(ending: mqtt.Client) -> None:
    # The reason stop_network_loop exists; should paho mend #872 this fails, and it can go.
    with pytest.raises(AttributeError, match="join"):
        ending.loop_stop()


def test_stop_network_loop_takes_the_ended_thread_as_stopped(ending: mqtt.Client) -> None:
    stop_network_loop(ending)
    assert ending._thread is None


def test_stop_network_loop_stops_a_running_thread(mosquitto: Mosquitto) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="loop-live", protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    thread = client._thread
    assert thread is not None and thread.is_alive()
    stop_network_loop(client)
    assert not thread.is_alive()
    client.disconnect()
