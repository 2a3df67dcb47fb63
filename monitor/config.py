"""Configuration: one TOML file, read once, validated once, into frozen objects.

Every problem is collected (not just the first) and reported as
``path.to.key: reason``. Unknown keys are errors, so a typo never falls back to a
default silently. Secrets may come from the file, an environment variable or a
file of their own; the environment is read here and nowhere else.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, datetime
from datetime import time as dt_time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import ParseResult, urlparse
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from monitor import geo
from monitor.errors import ConfigError
from monitor.named_file import NamedFileError, read_named_text
from monitor.shown_url import shown_url
from rules.model import AdjoiningOwner, Placement, SensorInfo, SensorKind, SiteContext, TownContact
from rules.numbers import number_problem
from rules.toml_text import toml_document

if TYPE_CHECKING:
    from monitor.times import ScopeBound

T = TypeVar("T")

# --------------------------------------------------------------------------- objects


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential; its repr never shows the value.

    ``unavailable`` says why the value could not be read on this machine (an unset
    environment variable, an unreadable file) when the configuration was loaded with
    ``secrets="defer"``; the value is then empty.
    """

    value: str = field(repr=False)
    unavailable: str = ""

    def __bool__(self) -> bool:
        return bool(self.value)


class SecretProblem(str):
    """A problem that is not the file's fault: a secret it names is not available here.

    Kept apart from the other problems so ``check-config`` can tell "this configuration is
    invalid" from "this machine lacks a secret" (docs/CONFIG.md, Secrets).
    """


# "require": an unavailable secret is a problem (commands that connect or sign);
# "defer": it is recorded on the Secret and only matters to whoever uses it (status, notices,
# evidence read the store and never need the broker's password).
_SECRETS_MODE: ContextVar[str] = ContextVar("minewatch_secrets_mode", default="require")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The broker link of one process; ``url`` is the first of ``addresses``, the one tried first."""

    url: str = "mqtt://localhost:1883"
    # broker.urls: every node of a cluster, tried in turn on a failure (docs/CONFIG.md);
    # empty when only ``url`` was given.
    urls: tuple[str, ...] = ()
    client_id: str = "minewatch-daemon"
    username: str = ""
    password: Secret = Secret("")
    ca_file: str = ""
    protocol: str = "5"  # "5" or "3.1.1"
    session_expiry_s: int = 7 * 86400
    keepalive_s: int = 30
    topic_prefix: str = "minewatch"
    # One persistent session per topic filter (nats-server: docs/CONFIG.md, broker section).
    session_per_filter: bool = False
    # Keys the session ids so only its holders know them (nats-server: docs/CONFIG.md).
    session_key: Secret = Secret("")

    @property
    def addresses(self) -> tuple[str, ...]:
        """The broker addresses in the order they are tried (one without ``broker.urls``)."""
        return self.urls or (self.url,)

    @property
    def host(self) -> str:
        return urlparse(self.url).hostname or "localhost"

    @property
    def port(self) -> int:
        parsed = urlparse(self.url)
        return parsed.port or (8883 if parsed.scheme == "mqtts" else 1883)

    @property
    def tls(self) -> bool:
        return urlparse(self.url).scheme == "mqtts"


@dataclass(frozen=True, slots=True)
class InfluxConfig:
    version: int  # 1 or 2
    url: str
    # v2
    org: str = ""
    bucket: str = ""
    token: Secret = Secret("")
    # v1
    database: str = ""
    username: str = ""
    password: Secret = Secret("")
    retention_policy: str = ""
    batch_size: int = 5000
    flush_interval_s: float = 1.0
    timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class StorageConfig:
    path: str = "minewatch.db"
    retention_days: float = 400.0  # per-second readings; findings, events, notices are kept
    influxdb: InfluxConfig | None = None


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    lateness_s: float = 300.0  # late data within this is placed and re-evaluated
    max_clock_skew_s: float = 120.0  # further in the future is rejected
    max_age_s: float = 30 * 86400.0  # further in the past is rejected
    clock: str = "wall"  # "wall", or "data": now = newest accepted timestamp (simulations)
    offline_after_periods: float = 10.0  # silent this many expected periods -> offline
    town_offline_alert_s: float = 1800.0  # offline longer than this also alerts the town
    clock_drift_limit_s: float = 2.0
    status_interval_s: float = 60.0
    anchor_interval_s: float = 900.0
    queue_size: int = 10000
    max_payload_bytes: int = 1_048_576
    sites: tuple[str, ...] = ()  # sites this instance owns; empty = all configured
    workers: int = 1  # processes sharing the owned sites ("auto": one per core); 1 = one process


# The level of a full-scale sine a sound input may have (a sensor's calibration.full_scale_db,
# `levels --calibration`): every microphone and converter lies well inside it.
FULL_SCALE_DB_RANGE = (60.0, 200.0)


@dataclass(frozen=True, slots=True)
class Calibration:
    full_scale_db: float = 120.0  # level of a full-scale sine (peak 1.0), IEC-style offset
    offset_db: float = 0.0  # added to every level the sensor reports


@dataclass(frozen=True, slots=True)
class SensorConfig:
    id: str
    kind: SensorKind
    placement: Placement
    location: str = ""
    gates: tuple[str, ...] = ()
    expected_period_s: float = 1.0
    calibration: Calibration = Calibration()
    signing_key: Secret = Secret("")
    require_signature: bool = False
    # (x, y) in metres on a plan of the operator's own (older configs; complaints typed as x/y)
    plan: tuple[float, float] | None = None
    # (latitude, longitude): the site plan and complaints' nearest monitors
    position: geo.LatLon | None = None
    # A seismograph's distance from the blasting to its monitoring point (the site law before a
    # blast); None: the distance each blast's notice gives to the nearest structure.
    distance_m: float | None = None

    def info(self) -> SensorInfo:
        return SensorInfo(self.id, self.kind, self.placement, self.location, self.gates)


@dataclass(frozen=True, slots=True)
class GateConfig:
    id: str
    name: str = ""
    position: geo.LatLon | None = None


@dataclass(frozen=True, slots=True)
class ParcelConfig:
    """A parcel drawn on the site plan, e.g. one a conveyor crosses (Dovre 6.G)."""

    id: str
    name: str = ""
    section: str = ""  # the ordinance section it is drawn for, e.g. "6.G"
    polygon: tuple[geo.LatLon, ...] = ()


@dataclass(frozen=True, slots=True)
class DwellingConfig:
    """A dwelling or other structure near the site, drawn on the plan (outside the boundary)."""

    id: str
    name: str = ""
    owner: str = ""  # the adjoining owner (sites.adjoining_owners id) it belongs to, if any
    position: geo.LatLon = (0.0, 0.0)


@dataclass(frozen=True, slots=True)
class AdjoiningOwnerConfig:
    id: str
    name: str = ""
    parcel: str = ""


@dataclass(frozen=True, slots=True)
class TownContactConfig:
    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class SiteConfig:
    id: str
    name: str
    timezone: str
    latitude: float
    longitude: float
    operator: str = ""
    operator_address: str = ""  # the Operator's postal address, printed on notices (may span lines)
    preexisting: bool = False
    profile: str = "dovre"
    agreement: Mapping[str, Any] = field(default_factory=dict)  # section 4 overrides
    flags: Mapping[str, Any] = field(default_factory=dict)
    gates: tuple[GateConfig, ...] = ()
    sensors: tuple[SensorConfig, ...] = ()
    # Dovre 6.F: every owner of adjacent property within 1/2 mile, who must get each blast notice
    # (not only section 2's "adjoining property", which needs a residence).
    adjoining_owners: tuple[AdjoiningOwnerConfig, ...] = ()
    # Who takes blast notices for the Town (6.F), each with an id the portal's form offers.
    town_contacts: tuple[TownContactConfig, ...] = ()
    # The site plan (docs/CONFIG.md, "The site plan"): WGS84 latitude/longitude, all optional.
    boundary: tuple[geo.LatLon, ...] = ()  # open ring: the first point is not repeated
    parcels: tuple[ParcelConfig, ...] = ()
    dwellings: tuple[DwellingConfig, ...] = ()
    _sensor_index: dict[str, SensorConfig] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Looked up for every message: a dict, not a scan of a site's hundred sensors.
        self._sensor_index.update({s.id: s for s in self.sensors})

    def sensor(self, sensor_id: str) -> SensorConfig | None:
        return self._sensor_index.get(sensor_id)

    def context(self) -> SiteContext:
        return SiteContext(
            id=self.id,
            name=self.name,
            timezone=self.timezone,
            latitude=self.latitude,
            longitude=self.longitude,
            preexisting=self.preexisting,
            sensors={s.id: s.info() for s in self.sensors},
            flags=dict(self.flags),
            adjoining_owners=tuple(AdjoiningOwner(o.id, o.name, o.parcel) for o in self.adjoining_owners),
            town_contacts=tuple(TownContact(c.id, c.name) for c in self.town_contacts),
            gate_names={g.id: g.name for g in self.gates if g.name},
        )


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    type: str  # "mqtt" | "webhook" | "email"
    url: str = ""  # webhook
    secret: Secret = Secret("")  # webhook HMAC key
    topic: str = ""  # mqtt; default minewatch/{site}/alerts
    to: tuple[str, ...] = ()  # email
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_username: str = ""
    smtp_password: Secret = Secret("")
    sender: str = "minewatch@localhost"
    # webhook: a report's PDF and CSV ride in the body (base64) while their sizes together stay
    # within this many bytes; 0 = facts and digests only (docs/CONFIG.md)
    attach_max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecipientConfig:
    name: str
    role: str  # "town" | "operator" | "inspector"
    sites: tuple[str, ...] = ()  # empty = all
    channels: tuple[ChannelConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    min_gap_s: float = 600.0  # same condition re-alerts at most this often
    max_attempts: int = 8
    retry_base_s: float = 2.0
    retry_max_s: float = 600.0


@dataclass(frozen=True, slots=True)
class TownConfig:
    """Who issues notices for the Town and where the Operator replies: printed on every notice."""

    officer: str = ""  # the person who signs, e.g. "Jane Olson"
    title: str = ""  # e.g. "Town Clerk"
    contact: str = ""  # where a reply goes: postal address, telephone, e-mail (may span lines)

    @property
    def configured(self) -> bool:
        return bool(self.officer)


@dataclass(frozen=True, slots=True)
class AccountConfig:
    """A portal account (``[[portal.accounts]]``): who, which role, which sites, which times."""

    name: str
    role: str  # "operator" | "town" | "inspector"
    password_hash: str  # "scrypt$n$r$p$salt_hex$hash_hex" (minewatch hash-password)
    sites: tuple[str, ...] = ()  # empty: every configured site
    token_hash: str = ""  # "sha256$hex" of the API token (minewatch hash-password --token)
    not_before: str = ""  # inspectors: RFC 3339 time or date; nothing earlier is shown
    not_after: str = ""


@dataclass(frozen=True, slots=True)
class PortalConfig:
    """``[portal]``: the web portal (`minewatch serve`)."""

    bind: str = "127.0.0.1"  # localhost unless the operator opens it on purpose
    port: int = 8080
    secret_key: Secret = Secret("")  # signs session cookies; random per start when empty
    tls_cert: str = ""
    tls_key: str = ""
    secure_cookies: bool = False  # Secure cookies without tls_cert: TLS ends at a reverse proxy
    # Host names it answers to besides localhost and its own address (a reverse proxy's name).
    hostnames: tuple[str, ...] = ()
    max_upload_mb: int = 512  # a bundle uploaded for verification
    mqtt_client_id: str = "minewatch-portal"
    # The broker account events are published with (the operator's: allowed to publish on
    # {prefix}/{site}/events/+); empty: [broker]'s username and password.
    mqtt_username: str = ""
    mqtt_password: Secret = Secret("")
    login_attempts: int = 5  # failed logins per name and address within login_window_s
    login_window_s: float = 300.0
    session_hours: float = 12.0
    complaints_per_hour: int = 5  # complaints accepted per client address (IPv6: its /64) an hour
    # A placement signal (rules/complaints.py): this many complaints the record does not bear out
    # from one area within placement_days point the Town at a monitor's placement.
    placement_complaints: int = 3
    placement_days: int = 30
    # Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For/-Proto are believed;
    # empty: none, the connecting address is the client's.
    trusted_proxies: tuple[str, ...] = ()
    accounts: tuple[AccountConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    broker: BrokerConfig
    storage: StorageConfig
    daemon: DaemonConfig
    alerts: AlertsConfig
    sites: tuple[SiteConfig, ...]
    recipients: tuple[RecipientConfig, ...] = ()
    town: TownConfig = TownConfig()
    portal: PortalConfig = PortalConfig()
    source: str = ""  # the path it was read from
    raw_text: str = ""  # the file as read, for evidence bundles (secrets are references, not values)

    def site(self, site_id: str) -> SiteConfig | None:
        return next((s for s in self.sites if s.id == site_id), None)

    @property
    def owned_sites(self) -> tuple[SiteConfig, ...]:
        if not self.daemon.sites:
            return self.sites
        return tuple(s for s in self.sites if s.id in self.daemon.sites)


# --------------------------------------------------------------------------- reading


# A duration (a key ending in _s) or a count of days past these is a mistake (a typo's extra
# zeros, 1e300), and far enough past them Python's date arithmetic overflows: a lateness of 1e300 s
# passed check-config, then the site's judging failed every round. Keys with a limit of their
# own (the MQTT fields' sizes) say it where they are read.
LONGEST_DURATION_S = 3660 * 86400  # ten years: max_age_s follows retention_days (400 by default)
LONGEST_DAYS = 100 * 366


def _usual_maximum(name: str) -> int | None:
    """The bound of a key by its kind: a duration in seconds or hours, a count of days, or none."""
    if name.endswith("_s"):
        return LONGEST_DURATION_S
    if name.endswith("_hours"):  # a session's end past Python's last date made every login a 500
        return LONGEST_DURATION_S // 3600
    if name.endswith("_days"):
        return LONGEST_DAYS
    return None


def _unit_of(name: str) -> str:
    """' s', ' hours' or ' days' after a limit, as the key's name says."""
    return {"_s": " s", "_hours": " hours", "_days": " days"}.get(name[name.rfind("_") :], "")


def _shown_value(value: Any) -> str:
    """A value read from TOML as a problem shows it: a date written without quotes, which TOML
    reads as a date, as it was written and how to write it (not Python's datetime.date(...))."""
    if isinstance(value, date | dt_time):  # datetime is a date
        written = value.isoformat()
        return f'{written}, a TOML date: write it in quotes, "{written}"'
    return repr(value)


class _Table:
    """Typed access to one TOML table that records problems instead of raising."""

    def __init__(self, data: Mapping[str, Any], path: str, problems: list[str]) -> None:
        self.data = data
        self.path = path
        self.problems = problems
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, reason: str) -> None:
        self.problems.append(f"{self.key(name)}: {reason}")

    def _get(self, name: str, default: T, check: Callable[[Any], T | None], expected: str) -> T:
        self.used.add(name)
        if name not in self.data:
            return default
        value = self.data[name]
        checked = check(value)
        if checked is None:
            self.problem(name, f"expected {expected}, got {_shown_value(value)}")
            return default
        return checked

    def text(self, name: str, default: str = "", *, required: bool = False) -> str:
        if required and name not in self.data:
            self.problem(name, "required")
        return self._get(name, default, lambda v: v if isinstance(v, str) else None, "a string")

    def flag(self, name: str, default: bool = False) -> bool:
        return self._get(name, default, lambda v: v if isinstance(v, bool) else None, "true or false")

    def integer(
        self, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        return int(self._numeric(name, default, whole=True, minimum=minimum, maximum=maximum))

    def number(
        self,
        name: str,
        default: float,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        required: bool = False,
    ) -> float:
        if required and name not in self.data:
            self.problem(name, "required")
        return float(self._numeric(name, default, whole=False, minimum=minimum, maximum=maximum))

    def _numeric(
        self, name: str, default: float, *, whole: bool, minimum: float | None, maximum: float | None
    ) -> float:
        """A number checked as the profile and scenario readers check theirs (rules.numbers)."""
        self.used.add(name)
        if name not in self.data:
            return default
        value = self.data[name]
        maximum = _usual_maximum(name) if maximum is None else maximum
        problem = number_problem(value, whole=whole, minimum=minimum, maximum=maximum, unit=_unit_of(name))
        if problem is not None:
            self.problem(name, problem)
            return default
        return value  # type: ignore[no-any-return]

    def str_list(self, name: str) -> tuple[str, ...]:
        def check(v: Any) -> tuple[str, ...] | None:
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return tuple(v)
            return None

        return self._get(name, (), check, "a list of strings")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.text(name, default)
        if value not in choices:
            self.problem(name, f"must be one of {', '.join(choices)}, got {value!r}")
            return default
        return value

    def table(self, name: str) -> _Table | None:
        self.used.add(name)
        if name not in self.data:
            return None
        value = self.data[name]
        if not isinstance(value, dict):
            self.problem(name, f"expected a table, got {value!r}")
            return None
        return _Table(value, self.key(name), self.problems)

    def mapping(self, name: str) -> dict[str, Any]:
        """A free-form table (checked by its consumer), e.g. agreement overrides."""
        self.used.add(name)
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            self.problem(name, f"expected a table, got {value!r}")
            return {}
        return dict(value)

    def tables(self, name: str) -> list[_Table]:
        self.used.add(name)
        value = self.data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.problem(name, "expected an array of tables ([[...]])")
            return []
        return [_Table(v, f"{self.key(name)}[{i}]", self.problems) for i, v in enumerate(value)]

    def secret(self, name: str) -> Secret:
        """``name``, ``name_env`` (environment variable) or ``name_file`` (file holding it)."""
        direct = self.text(name)
        env_name = self.text(f"{name}_env")
        file_name = self.text(f"{name}_file")
        given = [k for k, v in ((name, direct), (f"{name}_env", env_name), (f"{name}_file", file_name)) if v]
        if len(given) > 1:
            self.problem(name, f"give only one of {', '.join(given)}")
        if env_name:
            if env_name not in os.environ:
                return self._unavailable(f"{name}_env", f"environment variable {env_name!r} is not set")
            return Secret(os.environ[env_name])
        if file_name:
            try:
                return Secret(read_named_text(file_name, "password file").strip())
            except NamedFileError as exc:
                return self._unavailable(f"{name}_file", str(exc))
        return Secret(direct)

    def _unavailable(self, name: str, reason: str) -> Secret:
        problem = SecretProblem(f"{self.key(name)}: {reason}")
        if _SECRETS_MODE.get() == "require":
            self.problems.append(problem)
        return Secret("", unavailable=str(problem))

    def finish(self) -> None:
        for unknown in sorted(set(self.data) - self.used):
            self.problem(unknown, "unknown key")


def _identifier(t: _Table, name: str) -> str:
    value = t.text(name, required=True)
    if name in t.data and isinstance(t.data[name], str) and not value:
        t.problem(name, "must not be empty (it names the thing in topics, records and pages)")
    elif value and (not all(c.isalnum() or c in "-_" for c in value) or len(value) > 64):
        t.problem(name, f"{value!r} may hold only letters, digits, '-' and '_' (at most 64)")
    elif value.startswith("-"):
        # Typed after an option it reads as one (``--sensor -n1``), and a spreadsheet opening a
        # CSV of readings takes a cell beginning with '-' for a formula.
        t.problem(name, f"{value!r} must begin with a letter, a digit or '_', not '-'")
    return value


def _topic_level(t: _Table, name: str, default: str) -> str:
    """One MQTT topic level of our own: no level separator, no wildcard, not the broker's ``$``."""
    value = t.text(name, default)
    if not value or any(c in value for c in "/+#\0") or value.startswith("$"):
        t.problem(
            name, f"{value!r} is not one topic level: not empty, no '/', '+', '#', and not starting with '$'"
        )
    return value


def _ca_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be the CA certificates a TLS connection trusts, or None. A file that
    holds none would otherwise fail inside paho's tls_set at the first connection."""
    import ssl

    try:
        pem = read_named_text(path, "CA certificate file")
    except NamedFileError as exc:
        return str(exc)
    try:
        ssl.create_default_context().load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError):
        return f"{path}: holds no certificate TLS can use (expected PEM, -----BEGIN CERTIFICATE-----)"
    return None


def _broker(t: _Table | None) -> BrokerConfig:
    d = BrokerConfig()
    if t is None:
        return d
    urls = _broker_urls(t, d.url)
    url = urls[0] if urls else d.url
    ca_file = t.text("ca_file")
    if ca_file and (problem := _ca_file_problem(ca_file)):
        t.problem("ca_file", problem)
    config = BrokerConfig(
        url=url,
        urls=urls if "urls" in t.data else (),
        client_id=t.text("client_id", d.client_id),
        username=t.text("username"),
        password=t.secret("password"),
        ca_file=ca_file,
        protocol=t.choice("protocol", "5", ("5", "3.1.1")),
        # MQTT's own fields: four bytes (0xFFFFFFFF: the session never expires) and two.
        session_expiry_s=t.integer("session_expiry_s", d.session_expiry_s, minimum=0, maximum=0xFFFFFFFF),
        keepalive_s=t.integer("keepalive_s", d.keepalive_s, minimum=5, maximum=0xFFFF),
        topic_prefix=_topic_level(t, "topic_prefix", "minewatch"),
        session_per_filter=t.flag("session_per_filter"),
        session_key=t.secret("session_key"),
    )
    if not config.client_id:
        t.problem("client_id", "a persistent session needs a fixed client id")
    t.finish()
    return config


def _broker_urls(t: _Table, default: str) -> tuple[str, ...]:
    """``url`` (one broker) or ``urls`` (the nodes of a cluster, tried in turn), each checked."""
    if "url" in t.data and "urls" in t.data:
        t.problem("urls", "give url (one broker) or urls (a cluster's nodes), not both")
    if "urls" not in t.data:
        url = t.text("url", default)
        return (url,) if _broker_url_problem(t, "url", url) is None else ()
    t.used.add("url")
    urls = t.str_list("urls")
    if "urls" in t.data and not urls and isinstance(t.data["urls"], list):
        t.problem("urls", "at least one address is required")
    good = tuple(u for i, u in enumerate(urls) if _broker_url_problem(t, f"urls[{i}]", u) is None)
    if len(good) != len(urls):
        return ()
    for i, url in enumerate(urls):
        if url in urls[:i]:
            t.problem(f"urls[{i}]", f"{url!r} is listed twice")
    schemes = {urlparse(u).scheme for u in urls}
    if len(schemes) > 1:
        # One TLS setting (broker.ca_file) serves every node: a cluster is all TLS or none.
        t.problem("urls", "mixes mqtt:// and mqtts://: every node of a cluster takes the same TLS setting")
    return urls


def _broker_url_problem(t: _Table, key: str, url: str) -> str | None:
    """Reports and returns what is wrong with one broker address, or None."""
    parsed = _split_url(url)
    problem = None
    if isinstance(parsed, str):
        problem = f"expected mqtt://host[:port] or mqtts://host[:port], got {url!r}, which {parsed}"
    elif parsed.scheme not in ("mqtt", "mqtts") or not parsed.hostname:
        problem = f"expected mqtt://host[:port] or mqtts://host[:port], got {url!r}"
    else:
        try:
            _ = parsed.port
        except ValueError:
            problem = f"bad port in {url!r}"
    if problem is not None:
        t.problem(key, problem)
    return problem


def _split_url(url: str) -> ParseResult | str:
    """``url`` split, or why urllib cannot split it: a '[' without its ']' (an IPv6 address half
    typed) is a ValueError, which ended every command loading the configuration in a traceback."""
    try:
        return urlparse(url)
    except ValueError as exc:
        return f"is not a URL ({exc})"


def _influx(t: _Table) -> InfluxConfig:
    version = t.integer("version", 2)
    if version not in (1, 2):
        t.problem("version", f"must be 1 (InfluxDB 1.x /write API) or 2 (v2 API), got {version}")
    url = t.text("url", required=True)
    parsed = _split_url(url)
    if isinstance(parsed, str):
        t.problem("url", f"expected http(s)://host:port, got {url!r}, which {parsed}")
    elif url and parsed.scheme not in ("http", "https"):
        t.problem("url", f"expected http(s)://host:port, got {url!r}")
    config = InfluxConfig(
        version=version,
        url=url,
        org=t.text("org"),
        bucket=t.text("bucket"),
        token=t.secret("token"),
        database=t.text("database"),
        username=t.text("username"),
        password=t.secret("password"),
        retention_policy=t.text("retention_policy"),
        batch_size=t.integer("batch_size", 5000, minimum=1),
        flush_interval_s=t.number("flush_interval_s", 1.0, minimum=0.01),
        timeout_s=t.number("timeout_s", 10.0, minimum=0.1),
    )
    if version == 2:
        for name in ("org", "bucket"):
            if not getattr(config, name):
                t.problem(name, "required for the v2 API")
    if version == 1 and not config.database:
        t.problem("database", "required for the v1 API")
    t.finish()
    return config


def _storage(t: _Table | None) -> StorageConfig:
    if t is None:
        return StorageConfig()
    influx_table = t.table("influxdb")
    config = StorageConfig(
        path=t.text("path", StorageConfig().path),
        retention_days=t.number("retention_days", 400.0, minimum=1.0),
        influxdb=_influx(influx_table) if influx_table is not None else None,
    )
    t.finish()
    return config


def _daemon(t: _Table | None) -> DaemonConfig:
    if t is None:
        return DaemonConfig()
    d = DaemonConfig()
    config = DaemonConfig(
        # The light of this much data time is kept in memory to re-judge late data, and minutes
        # of a silent site close this far behind: a day is already far more than any link needs.
        lateness_s=t.number("lateness_s", d.lateness_s, minimum=0, maximum=86400),
        max_clock_skew_s=t.number("max_clock_skew_s", d.max_clock_skew_s, minimum=0),
        max_age_s=t.number("max_age_s", d.max_age_s, minimum=60),
        clock=t.choice("clock", "wall", ("wall", "data")),
        offline_after_periods=t.number("offline_after_periods", d.offline_after_periods, minimum=1),
        town_offline_alert_s=t.number("town_offline_alert_s", d.town_offline_alert_s, minimum=0),
        clock_drift_limit_s=t.number("clock_drift_limit_s", d.clock_drift_limit_s, minimum=0),
        status_interval_s=t.number("status_interval_s", d.status_interval_s, minimum=1),
        anchor_interval_s=t.number("anchor_interval_s", d.anchor_interval_s, minimum=1),
        queue_size=t.integer("queue_size", d.queue_size, minimum=10),
        max_payload_bytes=t.integer("max_payload_bytes", d.max_payload_bytes, minimum=1024),
        sites=t.str_list("sites"),
        workers=_workers(t),
    )
    t.finish()
    return config


def _workers(t: _Table) -> int:
    """``daemon.workers``: a positive integer, or "auto" for one worker per core."""
    t.used.add("workers")
    value = t.data.get("workers", 1)
    if value == "auto":
        return os.cpu_count() or 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        t.problem("workers", f'must be "auto" or an integer of at least 1, got {value!r}')
        return 1
    return value


def _alerts(t: _Table | None) -> AlertsConfig:
    if t is None:
        return AlertsConfig()
    d = AlertsConfig()
    config = AlertsConfig(
        min_gap_s=t.number("min_gap_s", d.min_gap_s, minimum=0),
        max_attempts=t.integer("max_attempts", d.max_attempts, minimum=1),
        retry_base_s=t.number("retry_base_s", d.retry_base_s, minimum=0.01),
        retry_max_s=t.number("retry_max_s", d.retry_max_s, minimum=0.01),
    )
    if config.retry_max_s < config.retry_base_s:
        t.problem("retry_max_s", f"{config.retry_max_s:g} is below retry_base_s ({config.retry_base_s:g})")
    t.finish()
    return config


def _sensor(t: _Table, gate_ids: set[str]) -> SensorConfig:
    sensor_id = _identifier(t, "id")
    kind = t.choice("kind", "sound", tuple(k.value for k in SensorKind))
    default_placement = {
        "sky": Placement.SKY,
        "weather": Placement.SITE,
        "turbidity": Placement.BUFFER_LINE,
        "seismograph": Placement.STRUCTURE,
    }.get(kind, Placement.BOUNDARY)
    placement = t.choice("placement", default_placement.value, tuple(p.value for p in Placement))
    gates = t.str_list("gates")
    for gate in gates:
        if gate not in gate_ids:
            t.problem("gates", f"unknown gate {gate!r} (site gates: {', '.join(sorted(gate_ids)) or 'none'})")
    cal_table = t.table("calibration")
    calibration = Calibration()
    if cal_table is not None:
        calibration = Calibration(
            full_scale_db=cal_table.number(
                "full_scale_db", 120.0, minimum=FULL_SCALE_DB_RANGE[0], maximum=FULL_SCALE_DB_RANGE[1]
            ),
            offset_db=cal_table.number("offset_db", 0.0, minimum=-30.0, maximum=30.0),
        )
        cal_table.finish()
        if kind != "sound":
            t.problem("calibration", f"only sound sensors take a calibration, this one is {kind!r}")
    config = SensorConfig(
        id=sensor_id,
        kind=SensorKind(kind),
        placement=Placement(placement),
        location=t.text("location"),
        gates=gates,
        expected_period_s=t.number("expected_period_s", 1.0, minimum=0.05, maximum=86400),
        calibration=calibration,
        signing_key=t.secret("signing_key"),
        require_signature=t.flag("require_signature", False),
        plan=_plan_point(t),
        position=_position(t, "position"),
        distance_m=(
            t.number("distance_m", 0.0, minimum=1.0, maximum=100_000.0) if "distance_m" in t.data else None
        ),
    )
    if config.distance_m is not None and kind != "seismograph":
        t.problem("distance_m", f"only a seismograph takes a distance_m, this one is {kind!r}")
    if config.require_signature and not config.signing_key:
        t.problem("require_signature", "needs signing_key, signing_key_env or signing_key_file")
    t.finish()
    return config


def _plan_point(t: _Table) -> tuple[float, float] | None:
    """``plan = [x, y]``: the sensor's place on the site plan in metres (complaints' nearest monitors)."""

    def check(v: Any) -> tuple[float, float] | None:
        if isinstance(v, list) and len(v) == 2 and all(number_problem(n) is None for n in v):
            return (float(v[0]), float(v[1]))
        return None

    return t._get("plan", None, check, "[x, y] in metres on the site plan")


# --------------------------------------------------------------------------- the site plan

# How far a boundary (or conveyor-parcel) monitor may stand from the line it watches, and how
# far outside the boundary any other on-site monitor may stand: a GPS fix and a mast's setback.
PLAN_TOLERANCE_M = 25.0


def _latlon(value: Any) -> geo.LatLon | None:
    if isinstance(value, list) and len(value) == 2 and all(number_problem(n) is None for n in value):
        return (float(value[0]), float(value[1]))
    return None


def _latlon_problem(point: geo.LatLon) -> str | None:
    lat, lon = point
    if not -90 <= lat <= 90:
        return f"latitude {lat:g} is out of range (-90 to 90; the order is [latitude, longitude])"
    if not -180 <= lon <= 180:
        return f"longitude {lon:g} is out of range (-180 to 180)"
    return None


def _position(t: _Table, name: str, *, required: bool = False) -> geo.LatLon | None:
    """``name = [latitude, longitude]`` in degrees (WGS84), range-checked."""
    if required and name not in t.data:
        t.problem(name, "required: [latitude, longitude] in degrees (WGS84)")
    point = t._get(name, None, _latlon, "[latitude, longitude] in degrees (WGS84)")
    if point is not None and (problem := _latlon_problem(point)) is not None:
        t.problem(name, problem)
        return None
    return point


def _ring(t: _Table, name: str) -> tuple[geo.LatLon, ...]:
    """``name = [[lat, lon], ...]``: a polygon, closed or closable (the first point may be repeated
    at the end or not), of at least 3 points, not crossing itself. () when absent or invalid."""
    t.used.add(name)
    if name not in t.data:
        return ()
    value = t.data[name]
    if not isinstance(value, list):
        t.problem(name, f"expected a list of [latitude, longitude] points, got {value!r}")
        return ()
    points: list[geo.LatLon] = []
    for i, item in enumerate(value):
        point = _latlon(item)
        if point is None:
            t.problem(f"{name}[{i}]", f"expected [latitude, longitude] in degrees (WGS84), got {item!r}")
            return ()
        if (problem := _latlon_problem(point)) is not None:
            t.problem(f"{name}[{i}]", problem)
            return ()
        points.append(point)
    ring = geo.open_ring(points)
    distinct = len(set(ring))
    if distinct < 3:
        t.problem(name, f"a polygon needs at least 3 distinct points, got {distinct}")
        return ()
    first_at: dict[tuple[float, float], int] = {}
    for i, point in enumerate(ring):
        if point in first_at:
            t.problem(f"{name}[{i}]", f"repeats point {first_at[point]}: list each corner once")
            return ()
        first_at[point] = i
    plane = geo.Plane.about(ring)
    crossing = geo.self_intersection([plane.xy(p) for p in ring])
    if crossing is not None:
        i, j = crossing
        n = len(ring)
        t.problem(
            name,
            f"the edge from point {i} to point {(i + 1) % n} crosses the edge from point {j} to point"
            f" {(j + 1) % n}: a polygon may not intersect itself (list the points in order around it)",
        )
        return ()
    return tuple(ring)


def _check_plan(t: _Table, site: SiteConfig) -> None:
    """Where each monitor and dwelling stands against the boundary (docs/CONFIG.md, The site plan)."""
    if not site.boundary:
        return
    plane = geo.Plane.about(site.boundary)
    boundary = [plane.xy(p) for p in site.boundary]
    parcels = [[plane.xy(p) for p in parcel.polygon] for parcel in site.parcels]
    for i, sensor in enumerate(site.sensors):
        if sensor.position is None:
            continue
        key = f"{t.key('sensors')}[{i}].position"
        xy = plane.xy(sensor.position)
        to_edge = geo.edge_distance(boundary, xy)
        inside = geo.contains(boundary, xy)
        placement = sensor.placement.value
        if placement == "boundary" and to_edge > PLAN_TOLERANCE_M:
            t.problems.append(
                f"{key}: {sensor.id} is a boundary monitor but stands {to_edge:.0f} m from the site"
                f" boundary (at most {PLAN_TOLERANCE_M:g} m): move the point onto the boundary"
            )
        elif placement == "conveyor":
            to_parcel = min([geo.edge_distance(p, xy) for p in parcels] or [to_edge])
            if min(to_parcel, to_edge) > PLAN_TOLERANCE_M:
                t.problems.append(
                    f"{key}: {sensor.id} watches a conveyor parcel's perimeter but stands {to_parcel:.0f} m"
                    f" from the nearest parcel edge (at most {PLAN_TOLERANCE_M:g} m)"
                )
        elif placement in ("site", "sky") and not inside and to_edge > PLAN_TOLERANCE_M:
            t.problems.append(
                f"{key}: {sensor.id} stands {to_edge:.0f} m outside the site boundary"
                f" (an on-site monitor is inside it or within {PLAN_TOLERANCE_M:g} m)"
            )
    for i, dwelling in enumerate(site.dwellings):
        if geo.contains(boundary, plane.xy(dwelling.position)):
            t.problems.append(
                f"{t.key('dwellings')}[{i}].position: {dwelling.id} lies inside the site boundary;"
                " a dwelling near the site is outside it"
            )


def _parcels(t: _Table) -> tuple[ParcelConfig, ...]:
    parcels = []
    for p in t.tables("parcels"):
        polygon = _ring(p, "polygon")
        if "polygon" not in p.data:
            p.problem("polygon", "required: [[latitude, longitude], ...] around the parcel")
        parcels.append(
            ParcelConfig(
                id=_identifier(p, "id"), name=p.text("name"), section=p.text("section"), polygon=polygon
            )
        )
        p.finish()
    return tuple(parcels)


def _dwellings(t: _Table, owner_ids: Sequence[str]) -> tuple[DwellingConfig, ...]:
    dwellings = []
    for d in t.tables("dwellings"):
        owner = d.text("owner")
        if owner and owner not in owner_ids:
            d.problem(
                "owner",
                f"unknown adjoining owner {owner!r} (adjoining_owners: {', '.join(owner_ids) or 'none'})",
            )
        position = _position(d, "position", required=True)
        dwellings.append(
            DwellingConfig(
                id=_identifier(d, "id"), name=d.text("name"), owner=owner, position=position or (0.0, 0.0)
            )
        )
        d.finish()
        if position is None:
            dwellings.pop()  # reported above; not drawn nor checked
    return tuple(dwellings)


def _site(t: _Table, check_profile: Callable[[_Table, str, Mapping[str, Any]], None]) -> SiteConfig:
    site_id = _identifier(t, "id")
    if site_id == "_":  # docs/PROTOCOL.md: <prefix>/_/rejected carries rejections of no configured site
        t.problem("id", "'_' is reserved for rejections under no configured site; choose another id")
    timezone = t.text("timezone", required=True)
    if timezone:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            t.problem("timezone", f"unknown time zone {timezone!r}")
    gate_tables = t.tables("gates")
    gates = []
    for g in gate_tables:
        gates.append(
            GateConfig(id=_identifier(g, "id"), name=g.text("name"), position=_position(g, "position"))
        )
        g.finish()
    gate_ids = {g.id for g in gates}
    sensors = tuple(_sensor(s, gate_ids) for s in t.tables("sensors"))
    seen: set[str] = set()
    for i, s in enumerate(sensors):
        if s.id in seen:
            t.problems.append(f"{t.key('sensors')}[{i}].id: duplicate sensor id {s.id!r}")
        seen.add(s.id)
    owners = []
    for o in t.tables("adjoining_owners"):
        owners.append(
            AdjoiningOwnerConfig(id=_identifier(o, "id"), name=o.text("name"), parcel=o.text("parcel"))
        )
        o.finish()
    owner_ids = [o.id for o in owners]
    for i, owner_id in enumerate(owner_ids):
        if owner_id in owner_ids[:i]:
            t.problems.append(f"{t.key('adjoining_owners')}[{i}].id: duplicate owner id {owner_id!r}")
    contacts = []
    for c in t.tables("town_contacts"):
        contacts.append(TownContactConfig(id=_identifier(c, "id"), name=c.text("name")))
        c.finish()
    for i, contact in enumerate(contacts):
        # One id space for both lists: a notice's recipient id names exactly one identity.
        if contact.id in [c.id for c in contacts[:i]] or contact.id in owner_ids:
            t.problems.append(
                f"{t.key('town_contacts')}[{i}].id: {contact.id!r} is already the id of another "
                "town contact or adjoining owner"
            )
    profile = t.text("profile", "dovre")
    agreement = t.mapping("agreement")
    config = SiteConfig(
        id=site_id,
        name=t.text("name", site_id),
        timezone=timezone,
        latitude=t.number("latitude", 0.0, minimum=-90, maximum=90, required=True),
        longitude=t.number("longitude", 0.0, minimum=-180, maximum=180, required=True),
        operator=t.text("operator"),
        operator_address=_document_text(t, "operator_address", lines=6),
        preexisting=t.flag("preexisting", False),
        profile=profile,
        agreement=agreement,
        flags=t.mapping("flags"),
        gates=tuple(gates),
        sensors=sensors,
        adjoining_owners=tuple(owners),
        town_contacts=tuple(contacts),
        boundary=_ring(t, "boundary"),
        parcels=_parcels(t),
        dwellings=_dwellings(t, owner_ids),
    )
    _check_plan(t, config)
    check_profile(t, profile, agreement)
    t.finish()
    return config


def _document_text(t: _Table, name: str, *, lines: int = 1, required: bool = False) -> str:
    """A value printed on a notice: no blank value where one is required, no more than ``lines`` lines."""
    value = t.text(name, required=required).strip()
    if required and name in t.data and not value:
        t.problem(name, "must not be empty: it is printed on every notice")
    count = len(value.splitlines())
    if count > lines:
        t.problem(name, f"at most {lines} line{'s' if lines > 1 else ''}, got {count}")
    if len(value) > 400:
        t.problem(name, f"at most 400 characters, got {len(value)}")
    return value


def _town(t: _Table | None) -> TownConfig:
    """``[town]``: optional, but once given, a notice needs all three (who signs, as what, reply to)."""
    if t is None:
        return TownConfig()
    config = TownConfig(
        officer=_document_text(t, "officer", required=True),
        title=_document_text(t, "title", required=True),
        contact=_document_text(t, "contact", lines=6, required=True),
    )
    t.finish()
    return config


def _channel(t: _Table) -> ChannelConfig:
    kind = t.choice("type", "mqtt", ("mqtt", "webhook", "email"))
    config = ChannelConfig(
        type=kind,
        url=t.text("url"),
        secret=t.secret("secret"),
        topic=t.text("topic"),
        to=t.str_list("to"),
        smtp_host=t.text("smtp_host"),
        smtp_port=t.integer("smtp_port", 587, minimum=1, maximum=65535),
        smtp_starttls=t.flag("smtp_starttls", True),
        smtp_username=t.text("smtp_username"),
        smtp_password=t.secret("smtp_password"),
        sender=t.text("sender", "minewatch@localhost"),
        attach_max_bytes=t.integer("attach_max_bytes", 8 * 1024 * 1024, minimum=0),
    )
    parsed = _split_url(config.url)
    if kind == "webhook" and isinstance(parsed, str):
        t.problem("url", f"a webhook needs an http(s) URL, got one which {parsed}")  # the URL may be secret
    elif kind == "webhook" and not isinstance(parsed, str) and parsed.scheme not in ("http", "https"):
        got = f"the scheme {parsed.scheme!r}" if parsed.scheme else "no scheme"
        t.problem("url", f"a webhook needs an http(s) URL, got {got} ({shown_url(config.url)!r})")
    if kind == "email":
        if not config.to:
            t.problem("to", "an e-mail channel needs at least one address")
        if not config.smtp_host:
            t.problem("smtp_host", "required for e-mail")
    t.finish()
    return config


def _recipient(t: _Table, site_ids: set[str]) -> RecipientConfig:
    config = RecipientConfig(
        name=t.text("name", required=True),
        role=t.choice("role", "town", ("town", "operator", "inspector")),
        sites=t.str_list("sites"),
        channels=tuple(_channel(c) for c in t.tables("channels")),
    )
    for site in config.sites:
        if site not in site_ids:
            t.problem("sites", f"unknown site {site!r}")
    t.finish()
    return config


PORTAL_ROLES = ("operator", "town", "inspector")


def _is_host_name(host: str) -> bool:
    """A DNS name, an IPv4 address or an IPv6 address without brackets (portal.hostnames)."""
    if ":" in host:
        import ipaddress

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    labels = host.removesuffix(".").split(".")
    return all(0 < len(x) <= 63 and x.isascii() and x.replace("-", "").isalnum() for x in labels)


def _scope_time(t: _Table, name: str) -> tuple[str, ScopeBound | None]:
    """An inspector's scope time as written and as the portal reads it (monitor.portal.data.User):
    a date, or a time with or without an offset (times.scope_bound), its form checked; None where
    it is not given or was refused (the problem is recorded). Each site reads it in its own zone
    (_scope_at_sites)."""
    value = t.text(name)
    if not value:
        return value, None
    from monitor.errors import UsageError
    from monitor.times import FORMS, TimeOutOfRange, scope_bound

    try:
        return value, scope_bound(value, name)
    except TimeOutOfRange as exc:
        t.problem(name, str(exc).removeprefix(f"{name}: "))
    except UsageError:
        t.problem(name, f"expected a date or a time, {FORMS}; got {value!r}")
    return value, None


def _scope_at_sites(
    t: _Table, first: ScopeBound | None, last: ScopeBound | None, zones: Mapping[str, str]
) -> None:
    """The scope as each of the account's sites reads it (``zones``: site id to time zone): a
    date or a local time must exist there, in range, once, and the scope must hold something."""
    from monitor.errors import UsageError
    from monitor.times import scope_moment

    for site, timezone in zones.items():
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            continue  # the site's own problem, recorded with it
        moments: list[datetime] = []
        for name, bound in (("not_before", first), ("not_after", last)):
            if bound is None:
                continue
            try:
                moments.append(scope_moment(bound, zone, name, end=name == "not_after"))
            except UsageError as exc:
                t.problem(name, f"at site {site!r} ({timezone}): {str(exc).removeprefix(f'{name}: ')}")
                return
        if len(moments) == 2 and moments[1] < moments[0]:
            # Two dates, two local times or two instants are in the same order at every site.
            where = "" if _bound_kind(first) == _bound_kind(last) else f" at site {site!r} ({timezone})"
            t.problem(
                "not_after",
                f"{t.text('not_after')} is before not_before ({t.text('not_before')}){where}:"
                " the scope holds nothing",
            )
            return


def _bound_kind(bound: ScopeBound | None) -> str:
    if not isinstance(bound, datetime):
        return "date"
    return "local time" if bound.tzinfo is None else "instant"


def _account(t: _Table, zones: Mapping[str, str]) -> AccountConfig:
    not_before, first = _scope_time(t, "not_before")
    not_after, last = _scope_time(t, "not_after")
    config = AccountConfig(
        name=_identifier(t, "name"),
        role=t.choice("role", "town", PORTAL_ROLES),
        password_hash=t.text("password_hash", required=True),
        sites=t.str_list("sites"),
        token_hash=t.text("token_hash"),
        not_before=not_before,
        not_after=not_after,
    )
    if config.password_hash:
        from monitor.credentials import scrypt_problem

        if problem := scrypt_problem(config.password_hash):
            t.problem("password_hash", problem)
    if config.token_hash and not config.token_hash.startswith("sha256$"):
        t.problem("token_hash", "expected a hash from `minewatch hash-password --token` (sha256$...)")
    for site in config.sites:
        if site not in zones:
            t.problem("sites", f"unknown site {site!r}")
    if (config.not_before or config.not_after) and config.role != "inspector":
        t.problem("not_before", "a time scope is for inspector accounts")
    elif first is not None or last is not None:
        sites = {s: zones[s] for s in config.sites if s in zones} if config.sites else dict(zones)
        _scope_at_sites(t, first, last, sites)
    t.finish()
    return config


def _portal(t: _Table | None, zones: Mapping[str, str]) -> PortalConfig:
    if t is None:
        return PortalConfig()
    d = PortalConfig()
    config = PortalConfig(
        bind=t.text("bind", d.bind),
        port=t.integer("port", d.port, minimum=1),
        secret_key=t.secret("secret_key"),
        tls_cert=t.text("tls_cert"),
        tls_key=t.text("tls_key"),
        secure_cookies=t.flag("secure_cookies"),
        hostnames=t.str_list("hostnames"),
        max_upload_mb=t.integer("max_upload_mb", d.max_upload_mb, minimum=1),
        mqtt_client_id=t.text("mqtt_client_id", d.mqtt_client_id),
        mqtt_username=t.text("mqtt_username"),
        mqtt_password=t.secret("mqtt_password"),
        login_attempts=t.integer("login_attempts", d.login_attempts, minimum=1),
        login_window_s=t.number("login_window_s", d.login_window_s, minimum=1),
        session_hours=t.number("session_hours", d.session_hours, minimum=0.01),
        complaints_per_hour=t.integer("complaints_per_hour", d.complaints_per_hour, minimum=1),
        placement_complaints=t.integer("placement_complaints", d.placement_complaints, minimum=2),
        placement_days=t.integer("placement_days", d.placement_days, minimum=1),
        trusted_proxies=t.str_list("trusted_proxies"),
        accounts=tuple(_account(a, zones) for a in t.tables("accounts")),
    )
    if config.port > 65535:
        t.problem("port", f"must be at most 65535, got {config.port}")
    for host in config.hostnames:
        if not _is_host_name(host):
            t.problem("hostnames", f"expected a host name or IP address (no scheme or port), got {host!r}")
    if bool(config.tls_cert) != bool(config.tls_key):
        t.problem("tls_cert" if not config.tls_cert else "tls_key", "tls_cert and tls_key go together")
    import ipaddress

    for proxy in config.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            t.problem("trusted_proxies", f"{proxy!r} is not an IP address or network (e.g. 10.0.0.0/8)")
    names = [a.name for a in config.accounts]
    if len(set(names)) != len(names):
        t.problem("accounts", "account names must be unique")
    t.finish()
    return config


def _check_profile_default(t: _Table, name: str, agreement: Mapping[str, Any]) -> None:
    from rules.profile import ProfileError, load_profile
    from rules.turbidity import site_area_sqft

    try:
        profile = load_profile(name, agreement)
    except ProfileError as exc:
        t.problems += site_profile_problems(t.path, exc.problems, agreement)
        return
    # A site fact the profile reads as an area (a standard's area_flag): a number or not given.
    flags = t.data.get("flags")
    areas = {getattr(s.params, "area_flag", "") for s in profile.standards.values()} - {""}
    for flag in sorted(areas):
        if isinstance(flags, dict) and flag in flags and site_area_sqft(flags[flag]) is None:
            t.problem(
                f"flags.{flag}", f"expected the site's area in square feet, 0 or more, got {flags[flag]!r}"
            )


def site_profile_problems(
    site_path: str, problems: Sequence[str], agreement: Mapping[str, Any] | None = None
) -> list[str]:
    """A ``ProfileError``'s problems under the site's key they come from, as load_config words
    them: ``sites[0].agreement`` for a problem of one of the site's overrides (it is worded with
    the override's key), ``sites[0].profile`` for the profile itself (its name, its file or a
    value in it)."""
    overrides = tuple(f"{key}:" for key in agreement or {})
    placed = []
    for problem in problems:
        if overrides and problem.startswith(overrides):
            placed.append(f"{site_path}.agreement: {problem}")
        else:
            placed.append(f"{site_path}.profile: {problem.removeprefix('profile: ')}")
    return placed


def profile_citation_gaps(sites: Sequence[SiteConfig]) -> list[str]:
    """For each profile given by path (a town's own, perhaps copied from an older one), one line
    per citation key it lacks and what the texts do without it (``rules.profile.citation_gaps``):
    ``profile /etc/minewatch/town.toml (sites quarry): notice.more_time: not given; ...``. A
    shipped profile is complete as shipped; a profile that does not load is reported elsewhere."""
    from rules.profile import ProfileError, citation_gaps_of

    users: dict[str, list[str]] = {}
    for site in sites:
        if site.profile.endswith(".toml"):
            users.setdefault(site.profile, []).append(site.id)
    lines = []
    for path, ids in users.items():
        try:
            gaps = citation_gaps_of(path)
        except ProfileError:
            continue
        lines += [f"profile {path} (sites {', '.join(ids)}): {gap}" for gap in gaps]
    return lines


def area_not_given(sites: Sequence[SiteConfig]) -> list[str]:
    """For each site with sensors a standard judges only where the site's area is given (a
    turbidity standard's ``area_flag``, land-disturbing 28-5(d)) and no such area: one line saying
    the standard is not judged there (``site tract: flags.disturbed_area_sqft: not given; ...``).
    A standard that reads the area from the operator's records (``area_open_kind``, as the shipped
    land-disturbing profile does) needs no flag and gets no line. A profile that does not load is
    reported elsewhere."""
    from rules.citation import citation_text
    from rules.profile import ProfileError, load_profile

    lines = []
    for site in sites:
        try:
            profile = load_profile(site.profile, site.agreement)
        except ProfileError:
            continue
        for key, standard in profile.standards.items():
            flag = getattr(standard.params, "area_flag", "")
            from_records = bool(getattr(standard.params, "area_open_kind", ""))
            if not flag or flag in site.flags or from_records:
                continue  # no area condition, the area given, or the records give it
            placement = getattr(standard.params, "line_placement", "")
            judged = [
                s.id
                for s in site.sensors
                if s.kind == SensorKind.TURBIDITY and s.placement.value == placement
            ]
            if judged:
                cited = citation_text(standard.section)
                lines.append(
                    f"site {site.id}: flags.{flag}: not given; {key} ({cited}) is not judged at"
                    f" {', '.join(judged)}: a reading beyond its limits is recorded as not judged,"
                    " area not given"
                )
    return lines


# What deploy/dovre-quarry.toml writes where a site's own words belong (the officer, addresses).
PLACEHOLDER = "REPLACE"


def placeholder_warning(key: str) -> str:
    """The warning for a key :func:`template_placeholders` found: one wording for check-config
    and the daemon."""
    return (
        f"{key}: still the deploy template's {PLACEHOLDER} text, which notices print as it stands; fill it in"
    )


def template_placeholders(text: str) -> list[str]:
    """The keys of a configuration's text still holding the deploy template's placeholder
    (notices would print "REPLACE with the name of the officer ..."), named as problems are."""

    def walk(value: Any, where: str) -> Iterator[str]:
        if isinstance(value, str):
            if value.lstrip().startswith(PLACEHOLDER) or f"\n{PLACEHOLDER}" in value:
                yield where
        elif isinstance(value, dict):
            for key, inner in value.items():
                yield from walk(inner, f"{where}.{key}" if where else key)
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                yield from walk(inner, f"{where}[{i}]")

    try:
        return list(walk(toml_document(text), ""))
    except tomllib.TOMLDecodeError:  # said by the configuration's own checks
        return []


def parse_config(
    text: str, source: str = "<string>", *, secrets: str = "require", profiles: bool = True
) -> Config:
    """Parse and validate configuration text; raises ConfigError listing every problem.

    ``secrets="defer"``: a secret that cannot be read here is no problem; it is left empty with
    the reason in ``Secret.unavailable`` (for commands that never use it). ``profiles=False``:
    the sites' profiles and agreements are not loaded and checked (that builds every rule's
    parameters, importing every rule module), for commands that never judge anything.
    """
    token = _SECRETS_MODE.set(secrets)
    try:
        return _parse_config(text, source, _check_profile_default if profiles else _profile_unchecked)
    finally:
        _SECRETS_MODE.reset(token)


def _profile_unchecked(t: _Table, name: str, agreement: Mapping[str, Any]) -> None:
    pass


def _parse_config(
    text: str, source: str, check_profile: Callable[[_Table, str, Mapping[str, Any]], None]
) -> Config:
    try:
        data = toml_document(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{source}: not valid TOML: {exc}"]) from None
    problems: list[str] = []
    root = _Table(data, "", problems)
    broker = _broker(root.table("broker"))
    storage = _storage(root.table("storage"))
    daemon = _daemon(root.table("daemon"))
    alerts = _alerts(root.table("alerts"))
    town = _town(root.table("town"))
    sites = tuple(_site(s, check_profile) for s in root.tables("sites"))
    if not sites:
        problems.append("sites: at least one [[sites]] table is required")
    site_ids = {s.id for s in sites}
    if len(site_ids) != len(sites):
        twice = sorted({s.id for s in sites if sum(t.id == s.id for t in sites) > 1})
        problems.append(
            f"sites: site ids must be unique; {', '.join(map(repr, twice))} is used more than once"
        )
    for owned in daemon.sites:
        if owned not in site_ids:
            problems.append(f"daemon.sites: unknown site {owned!r}")
    recipients = tuple(_recipient(r, site_ids) for r in root.tables("recipients"))
    portal = _portal(root.table("portal"), {s.id: s.timezone for s in sites})
    if (
        "portal" in data
        and broker.protocol == "3.1.1"
        and broker.username
        and portal.mqtt_username in ("", broker.username)
    ):
        # MQTT 5 tells the portal in the PUBACK that the broker refused an event (its account
        # may not publish events); MQTT 3.1.1 acknowledges and drops it, so the mistake is
        # caught here instead (docs/PROTOCOL.md, MQTT 3.1.1).
        problems.append(
            'portal.mqtt_username: with broker.protocol = "3.1.1" the broker cannot say that it'
            " refused an event: give the portal its own account (make-credentials' minewatch-portal),"
            " not the daemon's"
        )
    root.finish()
    if problems:
        raise ConfigError(problems)
    return Config(
        broker,
        storage,
        daemon,
        alerts,
        sites,
        recipients,
        town=town,
        portal=portal,
        source=source,
        raw_text=text,
    )


def load_config(path: str | Path, *, secrets: str = "require", profiles: bool = True) -> Config:
    """``secrets``: "require" (default) or "defer"; ``profiles``: check them; see parse_config."""
    try:
        text = read_named_text(path, "configuration file")
    except NamedFileError as exc:
        raise ConfigError([str(exc)]) from None
    return parse_config(text, str(path), secrets=secrets, profiles=profiles)
