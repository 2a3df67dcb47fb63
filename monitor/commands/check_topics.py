"""`minewatch check-topics --config FILE`: listen at the broker and name the topics the daemon never gets.

The daemon subscribes to each site's sensors and events (monitor.wire.protocol.input_filters)
and the broker delivers nothing else to it: a sensor publishing under a misspelt site or level
is not rejected, its messages are dropped at the broker without a trace (docs/PROTOCOL.md,
"Topics the daemon never receives"). This is the installer's check: subscribe to everything
under the topic prefix for a while and sort every topic seen into what the daemon receives,
rejects on its topic alone, never receives (and why), and the daemon's own outputs. Topics of
every configured site count as received, whichever instance owns the site (daemon.sites).

It logs in with a clean session of its own, anonymously or as ``--username``, never as the
daemon's account: with Mosquitto's use_username_as_clientid that login would take over the
daemon's connection.

Exit status: 0 every topic seen is received and passes the topic's checks; 1 some topic is
never received or is rejected on its topic; 2 a usage or connection error; 3 no message seen.
"""

from __future__ import annotations

import argparse
import secrets
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from monitor.commands.numbers import number
from monitor.config import BrokerConfig, SiteConfig, load_config
from monitor.errors import DecodeError, UsageError
from monitor.named_file import NamedFileError, read_named_text
from monitor.shown_text import one_line

if TYPE_CHECKING:  # paho loads with the command's work, not with the CLI
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

DEFAULT_SECONDS = 30.0
MAX_SECONDS = 86_400.0
MAX_TOPICS = 10_000  # distinct topics counted; beyond, messages are counted as "other topics"
MAX_LISTED = 50  # lines per section
ANSWER_TIMEOUT_S = 10.0  # for the CONNACK and the SUBACK

EXIT_PROBLEMS = 1
EXIT_BROKER = 2
EXIT_NOTHING_SEEN = 3

RECEIVED, REJECTED, UNREAD, OUTPUT = "received", "rejected", "unread", "output"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="configuration TOML file")
    parser.add_argument(
        "--seconds",
        type=number(0, MAX_SECONDS, above=True, unit=" s"),
        default=DEFAULT_SECONDS,
        help=f"how long to listen (default {DEFAULT_SECONDS:g})",
    )
    parser.add_argument(
        "--username",
        help="broker account that may read everything under the topic prefix (default: none, anonymous)",
    )
    parser.add_argument("--password-file", metavar="FILE", help="that account's password, alone in a file")


# --------------------------------------------------------------------------- the verdicts (pure)


def verdict(topic: str, sites: Mapping[str, SiteConfig], prefix: str) -> tuple[str, str]:
    """What the daemon does with a message on ``topic``, judged on the topic alone, and why."""
    from monitor.wire.codec import input_sender
    from monitor.wire.protocol import is_output_topic, why_unread

    if is_output_topic(topic, prefix):
        return OUTPUT, ""
    unread = why_unread(topic, sites, prefix)
    if unread is not None:
        return UNREAD, unread
    try:
        input_sender(topic, sites, prefix)
    except DecodeError as exc:
        return REJECTED, f"{exc.field}: {exc.reason}"
    return RECEIVED, ""


@dataclass
class Section:
    title: str
    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (messages, topic, reason)

    @property
    def messages(self) -> int:
        return sum(n for n, _, _ in self.lines)


def sections(counts: Mapping[str, int], sites: Mapping[str, SiteConfig], prefix: str) -> dict[str, Section]:
    found = {
        UNREAD: Section("never received by the daemon (the broker drops them: not even rejected)"),
        REJECTED: Section("received and rejected on their topic (journaled, published on .../rejected)"),
        RECEIVED: Section("received"),
        OUTPUT: Section("the daemon's own outputs"),
    }
    for topic, n in counts.items():
        kind, reason = verdict(topic, sites, prefix)
        found[kind].lines.append((n, topic, reason))
    for section in found.values():
        section.lines.sort(key=lambda line: (-line[0], line[1]))
    return found


def render(found: Mapping[str, Section], listed: Iterable[str]) -> list[str]:
    """The report's lines: counts per section, and each topic of the sections in ``listed``."""
    out = []
    for kind, section in found.items():
        if not section.lines:
            continue
        out.append(f"{section.title}: {_topics(len(section.lines))}, {_messages(section.messages)}")
        if kind not in listed:
            continue
        for n, topic, reason in section.lines[:MAX_LISTED]:
            out.append(f"  {_printable(topic)} ({_messages(n)}){': ' + _printable(reason) if reason else ''}")
        if len(section.lines) > MAX_LISTED:
            out.append(f"  ... and {_topics(len(section.lines) - MAX_LISTED)} more")
    return out


def _topics(n: int) -> str:
    return f"{n:,} topic{'s' if n != 1 else ''}"


def _messages(n: int) -> str:
    return f"{n:,} message{'s' if n != 1 else ''}"


def _printable(text: str, limit: int = 200) -> str:
    """A topic or reason as a terminal may show it: control characters escaped, cut short."""
    safe = one_line(text)
    return safe if len(safe) <= limit else f"{safe[:limit]}... ({len(text):,} characters)"


# --------------------------------------------------------------------------- listening (the shell)


@dataclass
class Listened:
    url: str
    counts: Counter[str]
    other: int  # messages on topics past MAX_TOPICS
    seconds: float  # how long it listened: less than asked when Ctrl-C stopped it
    interrupted: bool


def listen(broker: BrokerConfig, username: str | None, password: str | None, seconds: float) -> Listened:
    """Every topic published under the prefix for ``seconds``, counted; raises UsageError if the
    broker cannot be reached, refuses the login or the subscription."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from monitor.wire.link_state import Failover, describe_connect_error
    from monitor.wire.network_loop import stop_network_loop

    v5 = broker.protocol == "5"
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"minewatch-check-topics-{secrets.token_hex(4)}",
        protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        clean_session=None if v5 else True,  # MQTT 5: clean start, session expiry 0 (paho's default)
    )
    if username:
        client.username_pw_set(username, password)
    if broker.tls:
        client.tls_set(ca_certs=broker.ca_file or None, cert_reqs=ssl.CERT_REQUIRED)
    counts: Counter[str] = Counter()
    other = 0
    lock = threading.Lock()
    connected, subscribed = threading.Event(), threading.Event()
    answers: dict[str, str] = {}
    everything = f"{broker.topic_prefix}/#"

    def on_connect(c: mqtt.Client, u: object, f: object, reason: object, p: object) -> None:
        if getattr(reason, "is_failure", False):
            answers["connect"] = str(reason)
        else:
            c.subscribe(everything, qos=0)
        connected.set()

    def on_subscribe(
        c: mqtt.Client, u: object, mid: int, reasons: list[ReasonCode], p: Properties | None
    ) -> None:
        refused = [str(r) for r in reasons if getattr(r, "is_failure", False)]
        if refused:
            answers["subscribe"] = ", ".join(refused)
        subscribed.set()

    def on_message(c: mqtt.Client, u: object, message: mqtt.MQTTMessage) -> None:
        nonlocal other
        with lock:
            if message.topic in counts or len(counts) < MAX_TOPICS:
                counts[message.topic] += 1
            else:
                other += 1

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    url, problems = "", []
    for url in broker.addresses:
        host, port = Failover([url]).host_port
        try:
            client.connect(host, port, keepalive=broker.keepalive_s)
            break
        except (OSError, ValueError) as exc:
            problems.append(f"{url}: {describe_connect_error(exc, host, port, broker.tls)}")
    else:
        raise UsageError(f"cannot reach the broker: {'; '.join(problems)}")
    client.loop_start()
    try:
        if not connected.wait(ANSWER_TIMEOUT_S):
            raise UsageError(f"{url}: no answer to the login within {ANSWER_TIMEOUT_S:g} s")
        if "connect" in answers:
            if not username:
                raise UsageError(
                    f"{url} refused an anonymous login ({answers['connect']}): give --username NAME"
                    f" --password-file FILE, an account that may read {everything}"
                )
            raise UsageError(
                f"{url} refused the login ({answers['connect']}); check --username and --password-file"
            )
        if not subscribed.wait(ANSWER_TIMEOUT_S):
            raise UsageError(
                f"{url}: no answer to the subscription to {everything} within {ANSWER_TIMEOUT_S:g} s"
            )
        if "subscribe" in answers:
            raise UsageError(
                f"{url} refused the subscription to {everything} ({answers['subscribe']}):"
                " use an account that may read it (--username)"
            )
        # Ctrl-C stops listening early; what was seen is still reported, over the time it took.
        started, interrupted = time.monotonic(), False
        try:
            threading.Event().wait(seconds)
        except KeyboardInterrupt:
            interrupted = True
        listened = min(seconds, time.monotonic() - started)
    finally:
        client.disconnect()
        stop_network_loop(client)
    with lock:
        return Listened(url, Counter(counts), other, listened, interrupted)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, secrets="defer", profiles=False)
    broker = config.broker
    if args.username and args.username == broker.username:
        raise UsageError(
            f"--username {args.username} is the daemon's account (broker.username): logging in with it"
            " would take over the daemon's connection; use another account that may read the topics"
        )
    if args.password_file and not args.username:
        raise UsageError("--password-file needs --username")
    password = None
    if args.password_file:
        try:
            password = read_named_text(args.password_file, "password file").rstrip("\r\n")
        except NamedFileError as exc:
            raise UsageError(f"--password-file {exc}") from None
    heard = listen(broker, args.username, password, args.seconds)
    sites = {s.id: s for s in config.sites}
    prefix = broker.topic_prefix
    total = sum(heard.counts.values()) + heard.other
    listened = (
        f"{heard.seconds:.1f} s of {args.seconds:g} (stopped with Ctrl-C)"
        if heard.interrupted
        else f"{args.seconds:g} s"
    )
    print(
        f"listened {listened} to {prefix}/# at {heard.url}:"
        f" {_messages(total)} on {_topics(len(heard.counts))}"
        + (f" and {_messages(heard.other)} on topics past the first {MAX_TOPICS:,}" if heard.other else "")
    )
    if not total:
        print(
            f"nothing was published under {prefix}/ meanwhile, or this account may not read it"
            " (Mosquitto grants a subscription its ACL forbids and delivers nothing on it)"
        )
        return EXIT_NOTHING_SEEN
    found = sections(heard.counts, sites, prefix)
    for line in render(found, listed=(UNREAD, REJECTED)):
        print(line)
    return EXIT_PROBLEMS if found[UNREAD].lines or found[REJECTED].lines else 0
