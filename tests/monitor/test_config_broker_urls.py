"""broker.urls: a cluster's nodes, checked like broker.url, one line per mistake naming the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import parse_config
from monitor.errors import ConfigError
from tests.support.config_samples import MINIMAL


def test_urls_give_the_addresses_in_order_and_the_first_as_url() -> None:
    config = parse_config('[broker]\nurls = ["mqtt://a:1883", "mqtt://b:1884", "mqtt://c"]\n' + MINIMAL)
    assert config.broker.addresses == ("mqtt://a:1883", "mqtt://b:1884", "mqtt://c")
    assert (config.broker.url, config.broker.host, config.broker.port) == ("mqtt://a:1883", "a", 1883)


def test_url_alone_is_one_address() -> None:
    config = parse_config('[broker]\nurl = "mqtts://broker:8883"\n' + MINIMAL)
    assert config.broker.addresses == ("mqtts://broker:8883",)
    assert config.broker.urls == ()


@pytest.mark.parametrize(
    ("broker", "expected"),
    [
        ('url = "mqtt://a"\nurls = ["mqtt://b"]', "broker.urls: give url (one broker) or urls"),
        ("urls = []", "broker.urls: at least one address is required"),
        ('urls = "mqtt://a"', "broker.urls: expected a list of strings"),
        ('urls = ["mqtt://a", "http://b"]', "broker.urls[1]: expected mqtt://host[:port] or mqtts://"),
        ('urls = ["mqtt://a", "mqtt://b:99999"]', "broker.urls[1]: bad port in 'mqtt://b:99999'"),
        ('urls = ["mqtt://a", "mqtt://a"]', "broker.urls[1]: 'mqtt://a' is listed twice"),
        ('urls = ["mqtt://a", "mqtts://b"]', "broker.urls: mixes mqtt:// and mqtts://"),
        ('url = "tcp://a"', "broker.url: expected mqtt://host[:port]"),
    ],
)
def test_a_bad_address_list_is_one_line_naming_the_entry(broker: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[broker]\n{broker}\n" + MINIMAL)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems
    assert all("\n" not in p for p in info.value.problems)


def test_check_config_prints_the_entry_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.toml"
    path.write_text('[broker]\nurls = ["mqtt://a:1883", "mqtt//b"]\n' + MINIMAL)
    assert main(["check-config", str(path)]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert "broker.urls[1]: expected mqtt://host[:port] or mqtts://host[:port], got 'mqtt//b'" in text
    assert "Traceback" not in text


PORTAL = '\n[portal]\nsecret_key = "k"\n'


def test_mqtt311_refuses_the_daemons_account_for_the_portal() -> None:
    """MQTT 3.1.1 cannot say in the PUBACK that an event was refused: the portal's account
    must be its own (with MQTT 5 the refusal is reported when an event is sent)."""
    broker = '[broker]\nprotocol = "3.1.1"\nusername = "minewatch-daemon"\npassword = "p"\n'
    with pytest.raises(ConfigError) as info:
        parse_config(broker + MINIMAL + PORTAL)
    assert [p for p in info.value.problems if p.startswith("portal.mqtt_username: with broker.protocol")]
    parse_config(broker + MINIMAL + PORTAL + 'mqtt_username = "minewatch-portal"\nmqtt_password = "q"\n')
    parse_config(broker.replace('"3.1.1"', '"5"') + MINIMAL + PORTAL)
