"""Which topics reach the daemon: its subscription filters, and why every other topic does not.

``why_unread`` is checked against MQTT's own matching (paho's ``topic_matches_sub``) over the
filters the daemon subscribes to, so the reason it gives and the broker's behaviour cannot
drift apart.
"""

from __future__ import annotations

import pytest
from paho.mqtt.client import topic_matches_sub

from monitor.wire.protocol import input_filters, is_output_topic, why_unread

SITES = ("dovre-quarry", "north-pit")


def test_the_daemon_subscribes_to_each_sites_sensors_and_events() -> None:
    assert input_filters(SITES, "mw") == [
        "mw/dovre-quarry/sensors/#",
        "mw/north-pit/sensors/#",
        "mw/dovre-quarry/events/#",
        "mw/north-pit/events/#",
    ]


TOPICS = [
    "minewatch/dovre-quarry/sensors/n1/levels",
    "minewatch/dovre-quarry/sensors/n9/levels",  # received (then rejected: no such sensor)
    "minewatch/dovre-quarry/sensors/n1",  # received (then rejected: wrong shape)
    "minewatch/dovre-quarry/sensors",
    "minewatch/north-pit/events/blast",
    "minewatch/north-pit/events/blast/extra",
    "minewatch/dovre-qaurry/sensors/n1/levels",
    "minewatch/Dovre-Quarry/sensors/n1/levels",
    "minewatch/elsewhere/sensors/n1/levels",
    "minewatch/dovre-quarry/sensor/n1/levels",
    "minewatch/dovre-quarry/event/blast",
    "minewatch/dovre-quarry/n1/levels",
    "minewatch/dovre-quarry/findings",
    "minewatch/dovre-quarry",
    "minewatch/dovre-quarry/",
    "minewatch//sensors/n1/levels",
    "minewatch",
    "minewatch/",
    "Minewatch/dovre-quarry/sensors/n1/levels",
    "other/dovre-quarry/sensors/n1/levels",
    "/minewatch/dovre-quarry/sensors/n1/levels",
]


@pytest.mark.parametrize("topic", TOPICS)
def test_why_unread_agrees_with_the_brokers_matching(topic: str) -> None:
    delivered = any(topic_matches_sub(f, topic) for f in input_filters(SITES))
    reason = why_unread(topic, SITES)
    assert (reason is None) == delivered, reason


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        (
            "minewatch/dovre-qaurry/sensors/n1/levels",
            "site dovre-qaurry is not configured (did you mean dovre-quarry?)",
        ),
        ("minewatch/elsewhere/sensors/n1/levels", "site elsewhere is not configured"),
        (
            "minewatch/dovre-quarry/sensor/n1/levels",
            "level sensor is not one of sensors, events (did you mean sensors?)",
        ),
        ("minewatch/dovre-quarry/n1/levels", "level n1 is not one of sensors, events"),
        (
            "minewatch/dovre-quarry",
            "a topic of site dovre-quarry needs a third level, one of sensors, events",
        ),
        ("other/dovre-quarry/sensors/n1/levels", "not under minewatch/ (broker.topic_prefix)"),
    ],
)
def test_why_unread_names_the_level_and_a_likely_intent(topic: str, reason: str) -> None:
    assert why_unread(topic, SITES) == reason


def test_outputs_are_told_apart_from_inputs() -> None:
    assert is_output_topic("minewatch/dovre-quarry/findings")
    assert is_output_topic("minewatch/_/rejected")
    assert not is_output_topic("minewatch/dovre-quarry/sensors/n1/levels")
    assert not is_output_topic("minewatch/dovre-quarry/findings/x")
    assert not is_output_topic("other/dovre-quarry/findings")
