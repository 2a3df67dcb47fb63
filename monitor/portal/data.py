"""The portal's one door to the rest of minewatch (the facade).

Every page and API route reaches the store, the notices, the codec, the evidence and the
status through this module, and every site-bound query through :meth:`Scope.site`: an
account that may not see a site gets :class:`NotFound` (a 404), the same as for a site
that does not exist, so URL guessing learns nothing. When the store, notice or evidence
APIs move, only this file changes.

Writes:
- events are PUBLISHED to the broker on the site's event topic (the daemon validates and
  journals them like any sensor's event): the portal never competes with the daemon's
  ingest transactions for them;
- notice changes and the portal's own action records are small transactions on the store
  (busy timeout, retried when the daemon holds the write lock for longer).
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import time as dtime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from zoneinfo import ZoneInfo

from monitor.acoustics.wavfile import wav_bytes
from monitor.config import AccountConfig, Config, SiteConfig
from monitor.errors import DecodeError, MinewatchError, UsageError
from monitor.evidence.disclosure import TOWN_VIEW, TimeScope
from monitor.journal import audio_clips, queries
from monitor.journal.episodes import ViolationsBetween, site_episodes
from monitor.journal.store import Store
from monitor.notify.alerts import EARLY_WARNING_AUDIENCES
from monitor.portal import periods
from monitor.portal.periods import Period
from monitor.portal.siteplan import ALL_LAYERS, monitor_state, states_offered
from monitor.portal.svg import DayPlot
from monitor.times import EARLIEST, LATEST, ScopeBound, scope_window
from monitor.unfinished import own_partial, replace_whole
from monitor.wire.canonical import from_us, to_us
from monitor.wire.codec import decode, finding_from_json
from monitor.wire.protocol import AUDIO_FORMATS, event_topic, format_ts, parse_ts
from rules.model import BlastNotice, FindingKind, SensorKind
from rules.times import local_moment, span_text

if TYPE_CHECKING:
    from monitor.notify.notices import NoticeBook

T = TypeVar("T")
# Findings outside a violation episode whose raw audio the period view offers to play.
AUDIBLE_KINDS = frozenset(
    k.value
    for k in (
        FindingKind.EXEMPT_EXCEEDANCE,
        FindingKind.UNRELIABLE,
        FindingKind.WARNING,
        FindingKind.UNREPORTED_BLAST,
    )
)

# format_ts is re-exported: the pages format times as the rest of minewatch does, through here.
__all__ = [
    "AUDIENCE",
    "EVENT_KINDS",
    "MinuteCache",
    "NotFound",
    "Portal",
    "Refused",
    "Scope",
    "Sight",
    "User",
    "format_ts",
    "local_day",
    "new_event_id",
]

MAX_CSV_DAYS = 31  # a CSV of per-second sound levels: 2.7 million rows per meter at most
TREND_HOURS = 3  # the operator's live status draws each meter's minutes of the last hours
# The live status is told as of a whole second: requests of the same second (and chain head)
# share one computation; the page says that moment.
STATUS_STEP_S = 1
EVENT_KINDS = ("blast-notice", "blast", "truck", "work", "temporary-lighting")
NOTICE_ACTIONS = ("serve", "extend", "close", "escalate")
# Whose portal actions a reader sees, by the reader's role (an allow-list): the operator what
# its own accounts did, not the Town's and inspectors' logins, downloads and addresses, nor
# the attempts of unknown names (recorded with no role).
ACTIONS_SEEN: dict[str, frozenset[str]] = {"operator": frozenset({"operator"})}
# Whose alerts a reader reads, by role: the Town's inspectors read what is addressed to the Town.
AUDIENCE = {"operator": "operator", "town": "town", "inspector": "town"}


NO_REPORTS_IN_A_CLOSED_SCOPE = (
    "a report tells the notices' course up to now, which can lie after this account's time scope"
    " (not_after): the Town's account has the reports"
)


class NotFound(MinewatchError):
    """Not there, or not this account's to see: the two are not told apart."""


class Refused(MinewatchError):
    """A request the account may make, with a mistake in it (a form's field): shown to the user."""


# --------------------------------------------------------------------------- who asks


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: str
    sites: tuple[str, ...]  # empty: all
    # An inspector's time scope as configured (times.scope_bound): a date is a site's local day
    # and a time without an offset its local time, so each site reads it in its own zone
    # (Scope.bounds), as every other date a person gives minewatch is read.
    not_before: ScopeBound | None = None
    not_after: ScopeBound | None = None

    @classmethod
    def of(cls, account: AccountConfig) -> User:
        from monitor.times import scope_bound

        return cls(
            account.name,
            account.role,
            account.sites,
            scope_bound(account.not_before, "not_before") if account.not_before else None,
            scope_bound(account.not_after, "not_after") if account.not_after else None,
        )

    def bounds(self, timezone: str) -> tuple[datetime | None, datetime | None]:
        """The time scope [not_before, not_after] at a site in ``timezone`` (None: open on that
        side), its dates and local times read there (the configuration checked each reads at
        every site of the account: monitor.config)."""
        return _scope_bounds(self.not_before, self.not_after, timezone)


@dataclass(frozen=True, slots=True)
class Scope:
    """What one user may see: the one check every site-bound query goes through."""

    user: User
    config: Config

    def sites(self) -> list[SiteConfig]:
        return [s for s in self.config.sites if not self.user.sites or s.id in self.user.sites]

    def site(self, site_id: str) -> SiteConfig:
        site = self.config.site(site_id)
        if site is None or (self.user.sites and site.id not in self.user.sites):
            raise NotFound(f"no site {site_id!r}")
        return site

    @property
    def audience(self) -> str:
        """The audience whose alerts this account reads (AUDIENCE)."""
        return AUDIENCE[self.user.role]

    def bounds(self, site: SiteConfig) -> tuple[datetime | None, datetime | None]:
        """The account's time scope at ``site`` (User.bounds)."""
        return self.user.bounds(site.timezone)

    def window(self, site: SiteConfig, start: datetime, end: datetime) -> tuple[datetime, datetime]:
        """[start, end) cut to the account's time scope at ``site``, which holds its end
        (times.scope_window, as a bundle's TimeScope); NotFound when nothing is left."""
        start, end = scope_window(start, end, *self.bounds(site))
        if end <= start:
            raise NotFound("outside this account's time scope")
        return start, end

    def times(self, site: SiteConfig, event_verdicts: Mapping[str, str]) -> TimeScope | None:
        """The account's time scope at ``site`` as the allow-list of findings and what tells
        them (None: unscoped): the one check the findings API, the day view and bundles apply.
        A site's ``event_verdicts`` are its profile's (``Portal.times``)."""
        return TimeScope.of(*self.bounds(site), event_verdicts)


@functools.lru_cache(maxsize=1024)
def _scope_bounds(
    not_before: ScopeBound | None, not_after: ScopeBound | None, timezone: str
) -> tuple[datetime | None, datetime | None]:
    from monitor.times import scope_moment

    zone = ZoneInfo(timezone)
    return (
        None if not_before is None else scope_moment(not_before, zone, "not_before", end=False),
        None if not_after is None else scope_moment(not_after, zone, "not_after", end=True),
    )


@dataclass(frozen=True, slots=True)
class Sight:
    """The records a reader's monitor states are made of (``Portal._monitor_states``): the early
    warnings addressed to its ``audience`` (``Scope.audience``: the daemon raises them for the
    operator alone, EARLY_WARNING_AUDIENCES) and, for a time-scoped reader, only the warnings and
    violations its bundle's check shows (``times``, TimeScope.shows). A key of the portal's
    caches: readers who see alike share one computation."""

    audience: str
    times: TimeScope | None = None

    @property
    def early_warnings(self) -> bool:
        """Whether early warnings are this reader's at all (a legend offers that state only then)."""
        return self.audience in EARLY_WARNING_AUDIENCES


# --------------------------------------------------------------------------- the facade


@dataclass
class Portal:
    config: Config
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    publish: Callable[[str, bytes], None] | None = None  # set by the server: MQTT QoS 1, waits for the ack
    _local: threading.local = field(default_factory=threading.local)
    _profiles: dict[str, Any] = field(default_factory=dict)
    _minutes: MinuteCache = field(default_factory=lambda: MinuteCache())
    _hours: HourCache = field(default_factory=lambda: HourCache())
    _light_minutes: LightCache = field(default_factory=lambda: LightCache(60))
    _light_hours: LightCache = field(default_factory=lambda: LightCache(3600))
    _counts: CountCache = field(default_factory=lambda: CountCache())
    _days: DayCache = field(default_factory=lambda: DayCache())
    _findings: FindingsCache = field(default_factory=lambda: FindingsCache())
    _live: LiveCache = field(default_factory=lambda: LiveCache())

    # ------------------------------------------------------------------ connections

    def store(self) -> Store:
        """One Store per worker thread (sqlite3 connections stay in their thread)."""
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = _retry(lambda: Store(self.config.storage.path))
            store.conn.execute("PRAGMA busy_timeout = 30000")
            self._local.store = store
        return store

    def profile(self, site: SiteConfig) -> Any:
        if site.id not in self._profiles:
            from rules.profile import load_profile

            self._profiles[site.id] = load_profile(site.profile, site.agreement)
        return self._profiles[site.id]

    def times(self, scope: Scope, site: SiteConfig) -> TimeScope | None:
        """The account's time scope over the site's records (``Scope.times``), with the verdicts
        on one event its profile's rules declare."""
        return scope.times(site, self.profile(site).event_verdicts())

    # ------------------------------------------------------------------ the chain of actions

    def record_action(
        self, scope: Scope, site: str, action: str, target: str, source: str, data: Mapping[str, Any]
    ) -> int:
        store = self.store()

        def write() -> int:
            with store.batch():
                return store.append_portal_action(
                    site, scope.user.name, scope.user.role, action, target, source, data, self.clock()
                )

        return _retry(write)

    def actions(self, scope: Scope, site_id: str, limit: int = 50) -> list[dict[str, Any]]:
        site = scope.site(site_id)
        return [
            {
                "id": r["id"],
                "ts": format_ts(from_us(r["ts_us"])),
                "actor": r["actor"],
                "role": r["role"],
                "action": r["action"],
                "target": r["target"],
                "source": r["source"],
                "data": json.loads(r["data"]),
                "chain_seq": r["seq"],
            }
            for r in queries.portal_actions(
                self.store().conn, site.id, limit, ACTIONS_SEEN.get(scope.user.role, frozenset())
            )
        ]

    # ------------------------------------------------------------------ operator

    def status_moment(self) -> datetime:
        """The moment the status is told as of: the clock cut to the whole STATUS_STEP_S, so that
        every request of that step shares one computation (the pages say the moment)."""
        now_us = to_us(self.clock())
        return from_us(now_us - now_us % (STATUS_STEP_S * 1_000_000))

    def _live_version(self, site_id: str, at: datetime) -> Callable[[], tuple[int, int]]:
        """What a status computed as of ``at`` stands for: the site's chain head (every record
        stored for the site, of any kind the status reads, advances it) and the moment."""
        return lambda: (queries.chain_head_seq(self.store().conn, site_id), to_us(at))

    def sight(self, scope: Scope, site: SiteConfig) -> Sight:
        """What of the site's records the account's monitor states are made of (:class:`Sight`)."""
        return Sight(scope.audience, self.times(scope, site))

    def status(self, scope: Scope, site_id: str) -> dict[str, Any]:
        """The site's status (``site_status``) with each sensor's state, battery, clock offset and
        calibration, as of :meth:`status_moment`: computed once per change of the site's chain
        or step of the clock and shared by every request; the states are the account's own
        (:meth:`_states_at`: kept per :class:`Sight`, never per account). Shared: read it."""
        site = scope.site(site_id)
        return self._status_at(site, self.status_moment(), self.sight(scope, site))

    def _status_at(self, site: SiteConfig, at: datetime, sight: Sight) -> dict[str, Any]:
        """The site's facts as of ``at`` (:meth:`_facts_at`, one for every reader) with the states
        ``sight`` gives each sensor ("not_shown" where it gives none)."""

        def compute() -> dict[str, Any]:
            facts = self._facts_at(site, at)
            states = self._states_at(site, at, sight) or {}
            sensors = {k: {**v, "state": states.get(k, "not_shown")} for k, v in facts["sensors"].items()}
            return {**facts, "sensors": sensors}

        return self._live.get(("status", site.id, sight), self._live_version(site.id, at), compute)

    def _facts_at(self, site: SiteConfig, at: datetime) -> dict[str, Any]:
        return self._live.get(
            ("facts", site.id), self._live_version(site.id, at), lambda: self._facts(site, at)
        )

    def _facts(self, site: SiteConfig, now: datetime) -> dict[str, Any]:
        """The site's status without the monitors' states: what every reader of it is told alike."""
        from monitor.daemon.site_status import site_status

        profile = self.profile(site)
        titles = profile.titles
        status = site_status(self.store(), site, now, episode_gap_s=profile.episode_gap_s, titles=titles)
        conn = self.store().conn
        for sensor in site.sensors:
            entry = status["sensors"][sensor.id]
            entry["placement"] = sensor.placement.value
            last = entry.get("last_ts")
            age = None if last is None else (now - datetime.fromisoformat(last.replace("Z", "+00:00")))
            limit = max(120.0, sensor.expected_period_s * self.config.daemon.offline_after_periods)
            entry["online"] = age is not None and age.total_seconds() <= limit
            text = queries.latest_reading_data(conn, site.id, sensor.id, "status")
            if text is not None:
                data = json.loads(text)
                entry["battery_pct"] = data.get("battery_pct")
                entry["clock_offset_s"] = data.get("clock_offset_s")
            cal = self.store().last_calibration(site.id, sensor.id)
            if cal is not None:
                entry["calibration"] = {
                    "ts": format_ts(from_us(cal["ts_us"])),
                    "drift_db": cal["drift_db"],
                    "flagged": bool(cal["flagged"]),
                }
        return status

    def _states_at(self, site: SiteConfig, at: datetime, sight: Sight) -> dict[str, str] | None:
        """Each monitor's state as of ``at`` as ``sight`` lets its reader see it (the status page,
        its live part, the API and the site plan all show these; :meth:`_monitor_states`), kept
        per site and sight with the chain head and the status moment. None: a time-scoped reader
        whose scope does not cover the status's 24 hours (one scoped to a past period, or to hours
        of the last day) is shown no state, not the present."""
        from monitor.daemon.status_findings import STATUS_DAY

        if sight.times is not None and not sight.times.covers(to_us(at - STATUS_DAY), to_us(at)):
            return None
        return self._live.get(
            ("states", site.id, sight),
            self._live_version(site.id, at),
            lambda: self._monitor_states(site, at, self._facts_at(site, at), sight),
        )

    def _monitor_states(
        self, site: SiteConfig, now: datetime, status: Mapping[str, Any], sight: Sight
    ) -> dict[str, str]:
        """Each monitor's state as of ``now`` (``monitor_state``): offline by ``status``; else a
        violation episode of the status's 24 hours names it, or an early warning raised in them
        does, of those ``sight`` holds (:meth:`_warned`). For a time-scoped reader only what its
        bundle's check shows (TimeScope.shows): the episodes as made of the violations it may
        see, as its day view tells them, and the warnings naming no time outside its scope; the
        others colour nothing."""
        from monitor.daemon.site_status import STATUS_EPISODES
        from monitor.daemon.status_findings import STATUS_DAY

        conn, zone, times = self.store().conn, ZoneInfo(site.timezone), sight.times
        if times is None:
            episodes = status["episodes_24h"]  # the status's own: one set of facts
        else:
            told = site_episodes(
                conn,
                site.id,
                now - STATUS_DAY,
                now,
                self.profile(site).episode_gap_s,
                as_of=now,
                not_before=from_us(times.not_before_us) if times.not_before_us is not None else None,
                not_after=from_us(times.not_after_us) if times.not_after_us is not None else None,
                between=_violations_shown(conn, site.id, times, zone),
            )
            episodes = [{"sensors": t.facts.sensors} for t in told[-STATUS_EPISODES:]]
        in_episode = {s for e in episodes for s in e["sensors"]}
        warned = self._warned(site, now, sight)
        return {
            sensor.id: monitor_state(
                status["sensors"][sensor.id]["online"], sensor.id in in_episode, sensor.id in warned
            )
            for sensor in site.sensors
        }

    def _warned(self, site: SiteConfig, now: datetime, sight: Sight) -> set[str]:
        """The monitors named by the early warnings of the status's 24 hours that ``sight`` holds:
        those addressed to its audience (none to the Town and its inspectors) and, for a
        time-scoped reader, each its bundle's check shows. Every one is read, however many were
        raised: the oldest may be the only one naming a monitor."""
        from monitor.daemon.status_findings import STATUS_DAY

        if not sight.early_warnings:
            return set()
        conn, start = self.store().conn, now - STATUS_DAY
        if sight.times is None:
            return queries.sensors_alerted(conn, site.id, "early_warning", sight.audience, start, now)
        times, zone = sight.times, ZoneInfo(site.timezone)

        def page(offset: int, count: int) -> list[sqlite3.Row]:
            return queries.alerts_for_audience(
                conn, site.id, sight.audience, start, now, count, kind="early_warning", offset=offset
            )

        warned: set[str] = set()
        for r in _every_row(page):
            named = {str(s) for s in json.loads(r["data"]).get("sensors", ())}
            # The check is the costly part: a warning naming only monitors warned already adds nothing.
            if not named <= warned and times.shows(conn, site.id, "alert", r, zone):
                warned |= named
        return warned

    def plan(self, scope: Scope, site_id: str, chart: Callable[[str], str] | None = None) -> dict[str, Any]:
        """The site plan as this reader may see it: every layer, each monitor in the state the
        status gives this reader (:meth:`_states_at`: none for a time-scoped reader whose scope
        does not cover the status's 24 hours), and a legend offering only the states its records
        can give (no "early warning" to a reader the early warnings are not addressed to)."""
        from monitor.portal import siteplan

        site = scope.site(site_id)
        now = self.status_moment()
        sight = self.sight(scope, site)
        states = self._states_at(site, now, sight)
        plan = siteplan.view(site, ALL_LAYERS, states, chart, states_offered(sight.early_warnings))
        plan["as_of"] = format_ts(now) if states is not None else None
        plan["scoped"] = sight.times is not None
        return plan

    def findings(
        self, scope: Scope, site_id: str, start: datetime, end: datetime, kinds: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Current findings starting in [start, end) of the account's window (read them, they are shared)."""
        site = scope.site(site_id)
        start, end = scope.window(site, start, end)
        zone = ZoneInfo(site.timezone)
        found, _ = self._findings.get(self.store().conn, site.id, start, end, self.times(scope, site), zone)
        return [f for f in found if not kinds or f["kind"] in kinds]

    def findings_json(self, scope: Scope, site_id: str, start: datetime, end: datetime) -> bytes:
        """:meth:`findings` as the API's JSON body, encoded once per change of the findings."""
        site = scope.site(site_id)
        start, end = scope.window(site, start, end)
        zone = ZoneInfo(site.timezone)
        _, body = self._findings.get(self.store().conn, site.id, start, end, self.times(scope, site), zone)
        return body

    def today(self, site: SiteConfig, at: datetime | None = None) -> tuple[datetime, datetime]:
        """The site's local day of ``at`` (the clock's now when not given)."""
        tz = ZoneInfo(site.timezone)
        day = (at or self.clock()).astimezone(tz).date()
        return local_day(day, tz)

    def alerts(
        self,
        scope: Scope,
        site_id: str,
        audience: str,
        limit: int = 100,
        *,
        kind: str | None = None,
        not_kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """The site's newest ``limit`` alerts for ``audience`` (of ``kind`` only, or all but
        ``not_kind``), newest first: for a time-scoped reader those its bundle shows in clear
        (``_shown``: raised in its scope and naming no time outside it), counted among those, so
        that the list's length tells nothing of the others."""
        site = scope.site(site_id)
        start, end = scope.window(site, datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC))
        conn = self.store().conn

        def newest(offset: int, count: int) -> list[sqlite3.Row]:
            return queries.alerts_for_audience(
                conn, site.id, audience, start, end, count, kind=kind, not_kind=not_kind, offset=offset
            )

        rows = _newest_shown(newest, self._shown(scope, site), "alert", limit)
        return [
            {
                "id": r["id"],
                "ts": format_ts(from_us(r["created_us"])),
                "kind": r["kind"],
                "severity": r["severity"],
                "message": r["message"],
            }
            for r in rows
        ]

    def alert_kinds(self, scope: Scope, site_id: str, audience: str) -> list[str]:
        """The kinds of the site's alerts for ``audience``, sorted: for a time-scoped reader those
        of an alert it is listed (:meth:`alerts`); another kind would tell that one was raised."""
        site = scope.site(site_id)
        kinds = queries.alert_kinds_for_audience(self.store().conn, site.id, audience)
        if self.times(scope, site) is None:
            return kinds
        return [k for k in kinds if self.alerts(scope, site.id, audience, 1, kind=k)]

    def early_warnings(
        self, scope: Scope, site_id: str, start: datetime, end: datetime
    ) -> list[dict[str, Any]]:
        """The daemon's early warnings (alerts of kind early_warning) in [start, end) addressed to
        the account's audience (``Scope.audience``: they are raised for the operator), the newest
        100: for a time-scoped reader those its bundle's check shows (``_shown``)."""
        site = scope.site(site_id)
        start, end = scope.window(site, start, end)
        conn = self.store().conn

        def newest(offset: int, count: int) -> list[sqlite3.Row]:
            return queries.alerts_for_audience(
                conn, site.id, scope.audience, start, end, count, kind="early_warning", offset=offset
            )

        rows = _newest_shown(newest, self._shown(scope, site), "alert", 100)
        return [{"ts": format_ts(from_us(r["created_us"])), "message": r["message"]} for r in rows]

    def record_event(
        self, scope: Scope, site_id: str, kind: str, payload: Mapping[str, Any], source: str
    ) -> dict[str, Any]:
        """Validate like an MQTT event (monitor.wire.codec.decode), publish it, record who did it."""
        site = scope.site(site_id)
        if kind not in EVENT_KINDS:
            raise NotFound(f"no event kind {kind!r}")
        topic = event_topic(site.id, kind, self.config.broker.topic_prefix)
        body = json.dumps(dict(payload), separators=(",", ":")).encode()
        d = self.config.daemon
        from monitor.wire.protocol import Limits

        try:
            event = decode(
                topic,
                body,
                {site.id: site},
                self.clock(),
                Limits(d.max_clock_skew_s, d.max_age_s, d.max_payload_bytes),
                prefix=self.config.broker.topic_prefix,
            )
        except DecodeError as exc:
            # The form was filled in site time: say the times back in it (UTC beside).
            told = _UTC_STAMP.sub(lambda m: f"{local_moment(m[0], site.timezone)} ({m[0]})", str(exc))
            raise Refused(told) from None
        if self.publish is None:
            raise MinewatchError("the portal has no broker connection to record events")
        self.publish(topic, body)
        event_id = str(getattr(event, "blast_id", None) or getattr(event, "id", ""))
        self.record_action(scope, site.id, "event_recorded", f"{kind}|{event_id}", source, dict(payload))
        done: dict[str, Any] = {"topic": topic, "kind": kind, "id": event_id, "payload": dict(payload)}
        if isinstance(event, BlastNotice):
            done |= self.recipients_told(site, event.recipients)
            told = self.forecast_text(site, event)
            if told:
                done["forecast"] = told
        return done

    def design_units(self, site: SiteConfig) -> tuple[str, str]:
        """(charge, distance) units of the blast-notice form: lb and ft with a profile in in/s."""
        from monitor.journal.site_law import vibration_params

        params = vibration_params(self.profile(site))
        return ("lb", "ft") if params is not None and params.units == "in/s" else ("kg", "m")

    def forecast_text(self, site: SiteConfig, notice: BlastNotice) -> str:
        """A notice's scaled distance and predicted PPV (or why none), "" without charge/distance."""
        from monitor.journal.site_law import site_law_of, vibration_params

        params = vibration_params(self.profile(site))
        if params is None:
            return ""
        ahead = params.forecast(notice, site_law_of(self.store(), site, params))
        if ahead is None:
            return ""
        warn = " Early warning: reduce the charge per delay or increase the distance." if ahead.warn else ""
        return ahead.text(params.units) + "." + warn

    def forecasts(self, scope: Scope, site_id: str, at: datetime | None = None) -> list[dict[str, Any]]:
        """The pending blasts' forecasts as of ``at`` (the clock's now when not given; the status
        page's moment): ``{"blast", "text", "warn"}``."""
        from monitor.journal.site_law import forecasts, vibration_params

        site = scope.site(site_id)
        profile = self.profile(site)
        params = vibration_params(profile)
        if params is None:
            return []
        return [
            {"blast": f.blast_id, "text": f.text(params.units), "warn": f.warn}
            for f in forecasts(self.store(), site, profile, at or self.clock())
        ]

    def recipients_told(self, site: SiteConfig, recipients: tuple[str, ...]) -> dict[str, Any]:
        """What a blast notice's recipients reach, said to the operator at once (rules.blast_notice):
        ``{"missed": [...], "unmatched": "one sentence" or "", "section": the notice standard's}``;
        nothing when no rule checks them."""
        from rules.blast_notice import check_recipients, unmatched_text

        standard = next((s for s in self.profile(site).standards.values() if s.rule == "blast_notice"), None)
        if standard is None or not standard.params.check_recipients:
            return {}
        check = check_recipients(site.context(), standard.params, recipients)
        return {
            "missed": list(check.missed),
            "unmatched": unmatched_text(check.unmatched) if check.unmatched else "",
            "section": standard.section,
        }

    # ------------------------------------------------------------------ blast reports

    def _shown(
        self, scope: Scope, site: SiteConfig
    ) -> Callable[[str, Mapping[str, Any] | sqlite3.Row], bool] | None:
        """Whether the account may see a stored row of a kind (TimeScope.shows); None: every row."""
        times = self.times(scope, site)
        if times is None:
            return None
        conn, zone = self.store().conn, ZoneInfo(site.timezone)
        return lambda kind, row: times.shows(conn, site.id, kind, row, zone)

    def blast_reports(
        self, scope: Scope, site_id: str, start: datetime, end: datetime
    ) -> list[dict[str, Any]]:
        """The blasts with a seismograph record in [start, end) of the account's window, newest
        first: ``{"blast", "ts", "sensors"}`` (each has a report)."""
        from monitor.notify.blast_report import blast_events

        site = scope.site(site_id)
        start, end = scope.window(site, start, end)
        found = blast_events(self.store(), site, start, end, self._shown(scope, site))
        listed = [
            {"blast": blast_id, "ts": format_ts(events[0][2]), "sensors": [e[0] for e in events]}
            for blast_id, events in found.items()
        ]
        return sorted(listed, key=lambda b: b["ts"], reverse=True)

    def blast_report(self, scope: Scope, site_id: str, blast_id: str, fmt: str, sensor: str | None) -> bytes:
        """One blast's report (monitor.notify.blast_report), only from records in the account's
        time scope (its seismograph record, its findings); NotFound when there is none to see."""
        from monitor.notify.blast_report import blast_report_bytes

        site = scope.site(site_id)
        within = scope.window(site, datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
        # Its findings and events (the blast record, its notice) as the day view shows them.
        shown = self._shown(scope, site)
        try:
            return blast_report_bytes(
                self.store(), site, self.profile(site), blast_id, fmt, sensor, within, shown
            )
        except LookupError as exc:
            raise NotFound(str(exc).strip("'\"")) from None

    # ------------------------------------------------------------------ town: notices

    def notices(self, scope: Scope, site_id: str) -> list[Any]:
        from monitor.notify.notices import NoticeBook

        site = scope.site(site_id)
        return NoticeBook(self.store()).find(site=site.id)

    def notices_dated(self, scope: Scope, site_id: str) -> list[tuple[Any, Any]]:
        """:meth:`notices`, each with its dates as its document says them (``NoticeDates``)."""
        from monitor.notify.document import NoticeDates
        from monitor.notify.notices import NoticeBook

        book = NoticeBook(self.store())
        return [(n, NoticeDates.of(n, book.history(n.id))) for n in self.notices(scope, site_id)]

    def notice(self, scope: Scope, notice_id: str) -> tuple[Any, list[Any]]:
        from monitor.notify.notices import NoticeBook, UnknownNotice

        book = NoticeBook(self.store())
        try:
            notice = book.get(notice_id)
        except UnknownNotice:
            raise NotFound(f"no notice {notice_id!r}") from None
        scope.site(notice.site)
        return notice, book.history(notice.id)

    def notice_document(self, scope: Scope, notice_id: str, fmt: str) -> bytes:
        from monitor.notify.formats import render_notice

        notice, _ = self.notice(scope, notice_id)
        return render_notice(self.store().conn, notice.id, fmt, config=self.config)

    def notice_action(
        self,
        scope: Scope,
        notice_id: str,
        action: str,
        note: str,
        source: str,
        *,
        extra_days: int | None = None,
        before_deadline_reason: str | None = None,
        served_on: str | None = None,
    ) -> str:
        """serve / extend / close / escalate through the NoticeBook, with the portal's record, in
        one transaction."""
        from monitor.notify.notices import EarlyEscalation
        from monitor.times import day_given, moment_on_or_after

        notice, _ = self.notice(scope, notice_id)
        if action not in NOTICE_ACTIONS:
            raise NotFound(f"no action {action!r}")
        if not note.strip():
            raise Refused("reason: every change needs the Town's reason")
        served: datetime | None = None
        served_day: date | None = None
        if action == "serve":
            try:  # a day (the form's date field), or a time
                served = moment_on_or_after(
                    served_on or "", ZoneInfo(notice.timezone), "served on", notice.opened
                )
                served_day = day_given(served_on or "", "served on")
            except UsageError as exc:
                raise Refused(str(exc)) from None

        def change(book: NoticeBook, now: datetime) -> Any:
            if served is not None:
                return book.serve(notice.id, served, scope.user.name, note, now, served_day=served_day)
            if action == "extend":
                if extra_days is None or extra_days < 1:
                    raise Refused("days: give the number of extra days (at least 1)")
                return book.extend(notice.id, None, scope.user.name, note, now, extra_days=extra_days)
            if action == "close":
                return book.close(notice.id, note, scope.user.name, now)
            return book.escalate(
                notice.id, note, scope.user.name, now, before_deadline_reason=before_deadline_reason or None
            )

        def refusal(exc: Exception) -> str:
            if isinstance(exc, EarlyEscalation):  # in the form's words, not the command line's
                remedy = "say why in 'Before the cure deadline, because'"
                return f"{exc.reason_missing}; to escalate anyway, {remedy}"
            return str(exc)

        detail = {"note": note, "extra_days": extra_days, "reason": before_deadline_reason or ""}
        if served is not None:
            detail["served"] = format_ts(served)
        if served_day is not None:
            detail["served_day"] = served_day.isoformat()
        return self._change_notice(
            scope, notice.site, notice.id, f"notice_{action}", source, detail, change, refusal
        )

    def _change_notice(
        self,
        scope: Scope,
        site: str,
        notice_id: str,
        action: str,
        source: str,
        detail: dict[str, Any],
        change: Callable[[NoticeBook, datetime], Any],
        refusal: Callable[[Exception], str] = str,
    ) -> str:
        """A notice change through the NoticeBook and the portal's record of it, in one
        transaction (retried when the store is busy); the book's refusals as ``Refused``."""
        from monitor.notify.notices import NoticeBook, NoticeError

        store = self.store()
        book = NoticeBook(store)

        def write() -> str:
            now = self.clock()
            with store.batch():
                event = change(book, now)
                store.append_portal_action(
                    site, scope.user.name, scope.user.role, action, notice_id, source, detail, now
                )
                return str(event.message)

        try:
            return _retry(write)
        except NoticeError as exc:
            raise Refused(refusal(exc)) from None

    def request_extension(
        self, scope: Scope, notice_id: str, explanation: str, days: int | None, source: str
    ) -> str:
        """The operator's written request for more time (13.3.A), as `minewatch notices
        request-extension` records it (NoticeBook.request_extension), with the portal's record,
        in one transaction; refusals in the form's words."""

        notice, _ = self.notice(scope, notice_id)
        if not explanation.strip():
            raise Refused("explanation: say why more time is needed (the Town reads it)")
        return self._change_notice(
            scope,
            notice.site,
            notice.id,
            "notice_request_extension",
            source,
            {"explanation": explanation.strip(), "days": days},
            lambda book, now: book.request_extension(
                notice.id, explanation, scope.user.name, now, requested_days=days
            ),
        )

    # ------------------------------------------------------------------ complaints

    def submit_complaint(self, site_id: str, form: ComplaintForm) -> dict[str, Any]:
        """A resident's complaint (no account): checked against the record at once, stored and
        chained in one transaction; returns what the resident may see (``PUBLIC_COMPLAINT``)."""
        from monitor.complaints.book import ComplaintBook
        from monitor.complaints.check import Place, check_complaint

        site = self.config.site(site_id)
        if site is None:
            raise Refused(f"site: no site {site_id!r}")
        from monitor.complaints.placement import raise_placement_alerts
        from monitor.notify.delivery import Deliveries

        store = self.store()
        profile = self.profile(site)

        def write() -> Any:
            now = self.clock()
            place = Place(form.plan, form.position) if form.plan or form.position else None
            correlation = check_complaint(
                store.conn, site, profile, form.what, form.start, form.end, place, now
            )
            deliveries = Deliveries(store.conn, self.config)
            with store.batch():
                complaint = ComplaintBook(store).submit(
                    site.id,
                    form.what,
                    form.start,
                    form.end,
                    form.address,
                    form.plan,
                    form.description,
                    form.contact,
                    correlation,
                    now,
                    position=form.position,
                )
                # A repeated complaint the record does not bear out: one town alert an area.
                raise_placement_alerts(self.config, store, site, now, deliveries)
                return complaint

        return _complaint_view(_retry(write), self.config, "public")

    def complaint_status(self, reference: str) -> dict[str, Any]:
        """What anyone holding the reference may see of a complaint: its kind, when it came, its status."""
        from monitor.complaints.book import ComplaintBook, UnknownComplaint

        try:
            complaint = ComplaintBook(self.store()).get(reference)
        except UnknownComplaint:
            raise NotFound(f"no complaint {reference!r}") from None
        return _complaint_view(complaint, self.config, "public")

    def placement_signals(self, scope: Scope, site_id: str) -> list[dict[str, Any]]:
        """The Town's placement signals of the site (monitor/complaints/placement.py): areas whose
        repeated complaints the record does not bear out. The Town's only (they list complaints)."""
        from monitor.complaints.book import ComplaintBook
        from monitor.complaints.placement import signal_json, site_signals

        site = scope.site(site_id)
        if scope.user.role != "town":
            return []
        pc = self.config.portal
        found = site_signals(
            ComplaintBook(self.store()), site, self.clock(), pc.placement_complaints, pc.placement_days
        )
        return [signal_json(s) for s in found]

    def complaints(self, scope: Scope, site_id: str) -> list[dict[str, Any]]:
        """The site's complaints, newest first, as the reader's role may see them (an allow-list)."""
        from monitor.complaints.book import ComplaintBook

        site = scope.site(site_id)
        found = ComplaintBook(self.store()).find(site.id)
        return [_complaint_view(c, self.config, scope.user.role) for c in reversed(found)]

    def complaint(self, scope: Scope, reference: str) -> dict[str, Any]:
        from monitor.complaints.book import ComplaintBook, UnknownComplaint

        book = ComplaintBook(self.store())
        try:
            complaint = book.get(reference)
        except UnknownComplaint:
            raise NotFound(f"no complaint {reference!r}") from None
        scope.site(complaint.site)
        history = book.history(complaint.id) if scope.user.role == "town" else []
        return _complaint_view(complaint, self.config, scope.user.role, history)

    def complaint_action(
        self, scope: Scope, reference: str, action: str, status: str, notice_id: str, note: str, source: str
    ) -> str:
        """The Town's triage (a status with its note) or attaching a complaint to a notice."""
        from monitor.complaints.book import MAX_NOTE, ComplaintBook, ComplaintError

        view = self.complaint(scope, reference)
        if action not in ("triage", "attach"):
            raise NotFound(f"no action {action!r}")
        if len(note) > MAX_NOTE:
            raise Refused(f"note: at most {MAX_NOTE} characters, got {len(note)}")
        if action == "triage" and not note.strip():
            raise Refused("note: every change of status needs the Town's note")
        store = self.store()
        book = ComplaintBook(store)
        actor = scope.user.name

        def write() -> str:
            now = self.clock()
            with store.batch():
                if action == "triage":
                    done = book.triage(view["id"], status, note.strip(), actor, now)
                    message = f"Complaint {done.id} is now {done.status}."
                else:
                    done = book.attach(view["id"], notice_id.strip(), actor, note.strip(), now)
                    message = f"Complaint {done.id} attached to notice {done.notices[-1]}."
                store.append_portal_action(
                    done.site,
                    actor,
                    scope.user.role,
                    f"complaint_{action}",
                    done.id,
                    source,
                    {"status": status if action == "triage" else "", "notice": notice_id, "note": note},
                    now,
                )
                return message

        try:
            return _retry(write)
        except ComplaintError as exc:
            raise Refused(str(exc)) from None

    def notice_complaints(self, scope: Scope, notice_id: str) -> list[dict[str, Any]]:
        """The complaints a notice answers (attached to it by the Town)."""
        from monitor.complaints.book import ComplaintBook

        notice, _ = self.notice(scope, notice_id)
        found = ComplaintBook(self.store()).for_notice(notice.id)
        return [_complaint_view(c, self.config, scope.user.role) for c in found]

    # ------------------------------------------------------------------ reports

    def report_period(self, scope: Scope, site_id: str, month: str) -> Any:
        """A month of the site as a report period (monitor/reports/content.Period); the whole
        month must lie in the account's time scope (a report outside it would tell what the
        account may not see), and the scope must not end (``not_after``): a report is made as
        the store holds it now, so it tells each notice's later course (its deadline, extension,
        correction), which can lie after such a scope."""
        from monitor.reports.content import month_period, not_begun

        site = scope.site(site_id)
        if scope.user.not_after is not None:
            raise NotFound(NO_REPORTS_IN_A_CLOSED_SCOPE)
        try:
            year, number = (int(part) for part in month.split("-"))
            period = month_period(year, number, ZoneInfo(site.timezone))
        except ValueError:
            raise Refused(f"month: expected a month like 2026-11 (YYYY-MM), got {month[:20]!r}") from None
        if scope.window(site, period.start, period.end) != (period.start, period.end):
            raise NotFound("outside this account's time scope")
        if ahead := not_begun(period, self.clock(), site.id, ZoneInfo(site.timezone), self.store().conn):
            raise Refused(f"month: {ahead}")
        return period

    def chain_head(self, site_id: str) -> tuple[int, str]:
        from monitor.journal import queries

        return queries.chain_head(self.store().conn, site_id)

    def make_report(self, scope: Scope, site_id: str, month: str, pdf_path: Path) -> dict[str, Any]:
        """A month's compliance report (monitor/reports) written as ``pdf_path`` and the CSV
        beside it, and recorded in the chain as every report made is (``record_made``); returns
        its id, the head it was computed from and the head after its record (``head_after``:
        the same period asked again reuses it while the head stays there)."""
        from monitor.journal.report_files import csv_beside
        from monitor.reports.content import build_report
        from monitor.reports.formats import render_csv, render_pdf
        from monitor.reports.sending import record_made

        site = scope.site(site_id)
        period = self.report_period(scope, site_id, month)
        store = self.store()
        report = build_report(store.conn, site, self.profile(site), period, self.clock())
        pdf, csv = render_pdf(report), render_csv(report)
        csv_path = Path(csv_beside(str(pdf_path)))  # where the delivery looks for it
        for path, body in ((csv_path, csv), (pdf_path, pdf)):
            replace_whole(path, body, own_partial(path))  # threads may write one path at once
        rid = _retry(lambda: record_made(store, report, pdf, csv, str(pdf_path), self.clock()))
        return {
            "report_id": rid,
            "chain_seq": report.chain_seq,
            "chain_head": report.chain_head,
            "head_after": list(self.chain_head(site.id)),
            "files": [pdf_path.name, csv_path.name],
        }

    # ------------------------------------------------------------------ the day and period views

    def opening_period(self, scope: Scope, site_id: str) -> Period:
        """The period a view opens on: the hours of the latest local day that hold data (within
        the account's time scope), or today when the site has none."""
        site = scope.site(site_id)
        zone = ZoneInfo(site.timezone)
        conn = self.store().conn
        readings = [(s.id, "light") for s in site.sensors if s.kind in (SensorKind.LIGHT, SensorKind.SKY)]
        start, end = scope.window(site, EARLIEST, LATEST)
        bounds = queries.record_bounds(conn, site.id, readings, to_us(start), to_us(end))
        if bounds is not None:
            day = periods.aligned("day", from_us(bounds[1]), zone)
            first, last = max(day.start, start), min(day.end, end)
            within = queries.record_bounds(conn, site.id, readings, to_us(first), to_us(last))
            found = periods.latest_period((from_us(within[0]), from_us(within[1])) if within else None, zone)
            if found is not None:
                return found
        return periods.aligned("day", self.clock(), zone)

    def meter_limits(self, site: SiteConfig) -> dict[str, tuple[str, float]]:
        """Sound meter -> (section, limit in dB(A)) of the noise standard naming its placement
        (6.D at the boundary, 6.G at the conveyor parcel); a meter no standard judges is absent."""
        from rules.noise import NoiseParams

        noise = [s for s in self.profile(site).standards.values() if isinstance(s.params, NoiseParams)]
        limits = {}
        for meter in (s for s in site.sensors if s.kind is SensorKind.SOUND):
            standard = next((s for s in noise if meter.placement.value in s.params.placements), None)
            if standard is not None:
                limits[meter.id] = (standard.section, standard.params.limit_db)
        return limits

    def live_status(self, scope: Scope, site_id: str) -> dict[str, Any]:
        """The operator's live status: :meth:`status` (the last minute's LAeq per sensor), each
        meter's per-minute LAeq of the last TREND_HOURS (the period view's minutes, from the same
        cache) as a sparkline, and today's early warnings.

        The scope checks run on every call; the result is kept per site, the windows those checks
        allow and the reader's :class:`Sight` (never per account) with the site's chain head and
        the status moment, so that while neither moved a request costs one indexed MAX(seq)
        lookup. Shared: read it."""
        site = scope.site(site_id)
        at = self.status_moment()
        return self._live_at(scope, site, at, self._live_windows(scope, site, at))

    def _live_windows(self, scope: Scope, site: SiteConfig, at: datetime) -> tuple[int, int, int, int]:
        """What the live status reads, as the account's time scope allows (NotFound when it allows
        nothing), in us: the trend's minute window (whole hours, so that the cached minutes stay
        the same for an hour and only those chained since are read again) and today's window,
        for the early warnings and findings."""
        hour_end = (to_us(at) // 3_600_000_000 + 1) * 3_600_000_000
        start_us = hour_end - TREND_HOURS * 3_600_000_000
        start, _ = scope.window(site, from_us(start_us), at)
        day_start, day_end = scope.window(site, *self.today(site, at))
        return max(start_us, to_us(start)), hour_end, to_us(day_start), to_us(day_end)

    def _live_at(
        self, scope: Scope, site: SiteConfig, at: datetime, windows: tuple[int, int, int, int]
    ) -> dict[str, Any]:
        def compute() -> dict[str, Any]:
            from monitor.portal.sparkline import sparkline

            start_us, hour_end, day_start, day_end = windows
            meters = [s.id for s in site.sensors if s.kind is SensorKind.SOUND]
            minutes = self._minutes.get(self.store().conn, site.id, meters, start_us, hour_end)
            first, last = start_us // 60_000_000, to_us(at) // 60_000_000
            limits = self.meter_limits(site)
            trends = {}
            for sensor in meters:
                shown = {m: v for m, v in minutes.get(sensor, {}).items() if first <= m <= last}
                limit = limits.get(sensor)
                trends[sensor] = {
                    "svg": sparkline(shown, first, last, limit[1] if limit else None),
                    "minutes": len(shown),
                }
            return {
                "status": self._status_at(site, at, self.sight(scope, site)),
                "trends": trends,
                "trend_hours": TREND_HOURS,
                "warnings": self.early_warnings(scope, site.id, from_us(day_start), from_us(day_end)),
            }

        # The sight too: two readers allowed the same windows may be shown different warnings.
        key = ("live", site.id, windows, self.sight(scope, site))
        return self._live.get(key, self._live_version(site.id, at), compute)

    def status_page(self, scope: Scope, site_id: str, report_days: int) -> dict[str, Any]:
        """What the operator's status page shows besides the site plan: :meth:`live_status`, today's
        findings, the blast reports of the last ``report_days`` (to the end of today) and the
        pending blasts' forecasts, kept as :meth:`live_status` is (per site, the windows the scope
        allows and the sight, with the chain head and the status moment). Shared: read it."""
        site = scope.site(site_id)
        at = self.status_moment()
        windows = self._live_windows(scope, site, at)
        day_end = self.today(site, at)[1]
        reports = scope.window(site, day_end - timedelta(days=report_days), day_end)
        today = from_us(windows[2]), from_us(windows[3])

        def compute() -> dict[str, Any]:
            return {
                **self._live_at(scope, site, at, windows),
                "findings": self.findings(scope, site.id, *today),
                "reports": self.blast_reports(scope, site.id, *reports),
                "forecasts": self.forecasts(scope, site.id, at),
            }

        key = ("page", site.id, windows, to_us(reports[0]), to_us(reports[1]), self.sight(scope, site))
        return self._live.get(key, self._live_version(site.id, at), compute)

    def period(self, scope: Scope, site_id: str, period: Period) -> dict[str, Any]:
        """A period of a site: every configured sensor (sound: per-minute LAeq up to a day,
        hourly LAeq/L10/L90 beyond, against the limit of the standard that judges it; light and
        sky: mean and max lux against the light limits), exempt periods, blasts recorded and
        unreported against the blast window and sunset of each day, the violation episodes and
        the findings (each with its episode and notice)."""
        from rules.blast_window import BlastWindowParams
        from rules.high_intensity_light import HighIntensityLightParams
        from rules.light_trespass import LightTrespassParams
        from rules.sun import sunset

        site = scope.site(site_id)
        tz = ZoneInfo(site.timezone)
        start, end = scope.window(site, period.start, period.end)
        profile = self.profile(site)
        standards = list(profile.standards.values())
        params = [s.params for s in standards]
        window = next((p for p in params if isinstance(p, BlastWindowParams)), BlastWindowParams())
        trespass = next((p for p in params if isinstance(p, LightTrespassParams)), None)
        intensity = next((p for p in params if isinstance(p, HighIntensityLightParams)), None)
        conn = self.store().conn
        meters = [s for s in site.sensors if s.kind is SensorKind.SOUND]
        limit_of = self.meter_limits(site)  # meters no standard judges are absent
        start_us, end_us = to_us(start), to_us(end)
        sound: dict[str, list[tuple[Any, ...]]] = {}
        if period.resolution == "minute":
            minutes = self._minutes.get(conn, site.id, [m.id for m in meters], start_us, end_us)
            for sensor, values in minutes.items():
                sound[sensor] = [(_minute_ts(m), round(v, 1)) for m, v in sorted(values.items())]
        else:
            hours = self._hours.get(conn, site.id, [m.id for m in meters], start_us, end_us)
            for sensor, levels in hours.items():
                sound[sensor] = [
                    (_hour_ts(h), round(laeq, 1), round(l10, 1), round(l90, 1))
                    for h, (_, laeq, l10, l90) in sorted(levels.items())
                ]
        lit = [s.id for s in site.sensors if s.kind in (SensorKind.LIGHT, SensorKind.SKY)]
        by_minute = period.resolution == "minute"
        lux = (self._light_minutes if by_minute else self._light_hours).get(
            conn, site.id, lit, start_us, end_us
        )
        stamp = _minute_ts if by_minute else _hour_ts
        light = {
            sensor: [
                (stamp(slot), round(mean, 3), round(peak, 3)) for slot, (mean, peak) in sorted(slots.items())
            ]
            for sensor, slots in lux.items()
        }
        times = self.times(scope, site)  # a time-scoped reader sees the events wholly inside its scope only
        events = [
            e
            for e in queries.events_overlapping(conn, site.id, start, end)
            if times is None or times.shows(conn, site.id, "event", e, ZoneInfo(site.timezone))
        ]
        from monitor.notify.blast_report import blast_events, blast_notice_not_shown

        # A blast's report link only where Portal.blast_report serves it: its seismograph record
        # within the account's time scope (recorded after it, it is not the reader's to know of).
        around = scope.window(site, start - timedelta(hours=1), end + timedelta(hours=1))
        shown_rows = self._shown(scope, site)
        reported = blast_events(self.store(), site, *around, shown_rows)
        blasts = []
        for e in events:
            if e["kind"] == "blast" and start_us <= e["ts_us"] < end_us:
                blast_id = json.loads(e["data"]).get("blast_id", e["id"])
                fired = from_us(e["ts_us"])
                blast = {"id": blast_id, "ts": format_ts(fired), "report": blast_id in reported}
                # A notice the scope keeps from the reader, said as the blast's report says it.
                unseen = blast_notice_not_shown(self.store(), site, profile, blast_id, fired, shown_rows)
                blasts.append(blast if unseen is None else {**blast, "notice": unseen})
        # Exempt periods and the sensors they cover (work: the sound meters it names, all when
        # none; temporary lighting: the light sensors; an exempt exceedance: its meters).
        sound_ids = [m.id for m in meters if m.id in limit_of]
        light_ids = [s.id for s in site.sensors if s.kind is SensorKind.LIGHT]
        exempt = []
        for e in events:
            if e["kind"] != "work" or e["end_us"] is None:
                continue
            data = json.loads(e["data"])
            exempt.append(
                {
                    "start": format_ts(from_us(e["ts_us"])),
                    "end": format_ts(from_us(e["end_us"])),
                    "why": f"{e['kind']}: {data.get('kind', '')}".rstrip(": "),
                    "sensors": list(data.get("sensors") or sound_ids),
                }
            )
        # Temporary lighting: exempt on the year's allowed days only, counted as the rules count them.
        from monitor.journal.temporary_lighting import allowed_parts

        # A time-scoped reader sees the declarations its scope holds, and not the day's number,
        # which counts declarations before the scope.
        shown = {e["id"] for e in events if e["kind"] == "temporary-lighting"}
        for part in allowed_parts(conn, site, profile, start, end):
            if part.period.id in shown:
                day = f": day {part.ordinal} of {part.day.year}" if times is None else ""
                exempt.append(
                    {
                        "start": format_ts(part.on),
                        "end": format_ts(part.off),
                        "why": f"temporary-lighting{day}",
                        "sensors": light_ids,
                    }
                )
        # One set of facts: the violation episodes the notices tell, as far as the reader may see.
        titles = profile.titles
        not_before, not_after = scope.bounds(site)
        told = site_episodes(
            conn,
            site.id,
            start,
            end,
            profile.episode_gap_s,
            not_before=not_before,
            not_after=not_after,
            between=_violations_shown(conn, site.id, times, ZoneInfo(site.timezone)),
        )
        if times is not None:  # an episode's notice only when the reader may see the notice
            told = [
                t
                if t.notice_id is None
                or times.shows_notice(conn, site.id, t.notice_id, ZoneInfo(site.timezone))
                else replace(t, notice_id=None)
                for t in told
            ]
        episode_of = {f: t for t in told for f in t.facts.finding_ids}
        # The shared findings, each with the episode it is part of and that episode's notice
        # (copies: the cached findings are shared between views).
        findings = [
            {
                **f,
                "episode": episode_of[f["id"]].facts.id if f["id"] in episode_of else None,
                "notice": episode_of[f["id"]].notice_id if f["id"] in episode_of else None,
            }
            for f in self.findings(scope, site.id, start, end)
        ]
        # Raw audio to listen to: an episode's (below), and a judged exceedance's outside one.
        for f in findings:
            if f["episode"] is None and f["kind"] in AUDIBLE_KINDS:
                f["clips"] = self.audio_clips(
                    scope,
                    site.id,
                    f["sensors"],
                    parse_ts(f["window_start"] or f["start"]),
                    parse_ts(f["window_end"] or f["end"]),
                )
        exempt += [
            {"start": f["start"], "end": f["end"], "why": f["summary"][:120], "sensors": f["sensors"]}
            for f in findings
            if f["kind"] == "exempt_exceedance"
        ]
        unreported = [
            {"ts": f["start"], "sensors": f["sensors"], "finding": f["id"], "summary": f["summary"]}
            for f in findings
            if f["kind"] == FindingKind.UNREPORTED_BLAST.value
        ]
        days = []
        each_day = period.local(start).date()
        while _day_start(each_day, tz) < end:
            set_at = sunset(site.context(), each_day)
            days.append(
                {
                    "date": each_day.isoformat(),
                    "blast_window": {
                        "start": format_ts(
                            datetime.combine(each_day, dtime.fromisoformat(window.window_start), tz)
                        ),
                        "end": format_ts(
                            datetime.combine(each_day, dtime.fromisoformat(window.window_end), tz)
                        ),
                    },
                    "sunset": format_ts(set_at.at) if set_at.at is not None else None,
                }
            )
            each_day += timedelta(days=1)
        counts = self._counts.sensor_counts(conn, site.id, start_us, end_us)
        return {
            "site": site.id,
            "name": site.name,
            "timezone": site.timezone,
            "from": format_ts(period.start),
            "to": format_ts(period.end),
            "shown_from": format_ts(start),
            "shown_to": format_ts(end),
            "span": span_text(period.start, period.end, tz, with_date=True),
            "resolution": period.resolution,
            "sensors": [
                {
                    "id": s.id,
                    "kind": s.kind.value,
                    "placement": s.placement.value,
                    "location": s.location,
                    "plotted": s.id in sound or s.id in light,
                    "standard": limit_of[s.id][0] if s.id in limit_of else None,
                    "limit_db": limit_of[s.id][1] if s.id in limit_of else None,
                    "points": len(sound.get(s.id, light.get(s.id, []))),
                    "readings": counts.get(s.id),
                }
                for s in site.sensors
            ],
            "sound": sound,
            "light": light,
            "light_limits": {
                k: v
                for k, v in (
                    ("trespass_lux", trespass.limit_lux if trespass else None),
                    ("max_lux", intensity.max_lux if intensity else None),
                )
                if v is not None
            },
            "days": days,
            "blasts": blasts,
            "unreported_blasts": unreported,
            "exempt": exempt,
            "episodes": [
                {
                    **e.to_json(site.timezone, titles),
                    "clips": self.audio_clips(scope, site.id, e.facts.sensors, e.facts.start, e.facts.end),
                }
                for e in told
            ],
            "findings": findings,
        }

    def period_view(
        self,
        scope: Scope,
        site_id: str,
        period: Period,
        page: Callable[[dict[str, Any], str], str] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """:meth:`period` and its plot (SVG), served from memory while the site's chain is unchanged.

        The scope checks run first, on every call; the cache is keyed by the site and the
        window the account may see, so an account only ever gets a view computed for exactly
        its own window of a site it may see. Every record the daemon or the portal stores for a
        site (seconds, events, findings, actions) advances that site's chain head, so a view
        computed at head H is the current one while the head is still H. When it moved, the
        period is recomputed (MinuteCache and HourCache re-read only the minutes or hours whose
        seconds were chained since, LightCache those of the light readings chained since) and
        only the panels whose points or
        marks changed are drawn again: a past period nobody added to costs one indexed MAX(seq)
        lookup. The returned dict is shared: read it.

        ``page``: instead of the plot, return ``page(data, plot)``, cached with the view (one
        such function per caller: it is the cache key of what it renders).
        """
        site = scope.site(site_id)
        start, end = scope.window(site, period.start, period.end)
        # The reader's time scope too: within the same window a scoped reader sees less (a
        # finding reporting past its scope, a notice issued after it), never an unscoped view.
        times = self.times(scope, site)
        return self._days.get(
            (site.id, to_us(period.start), to_us(period.end), to_us(start), to_us(end), times),
            lambda: queries.chain_head_seq(self.store().conn, site.id),
            lambda: self.period(scope, site.id, period),
            page,
        )

    # ------------------------------------------------------------------ audio

    def audio_clips(
        self, scope: Scope, site_id: str, sensors: Sequence[str], start: datetime, end: datetime
    ) -> list[dict[str, str]]:
        """The clips to play for [start, end) (an episode's or a finding's): per sensor with raw
        audio there, its first MAX_CLIP_S seconds from the first block, within the account's
        time scope; each with the URL that serves it (:meth:`audio_clip`). One key lookup each."""
        site = scope.site(site_id)
        try:
            start, end = scope.window(site, start, end)
        except NotFound:
            return []
        conn = self.store().conn
        clips = []
        for sensor in sensors:
            first = queries.first_audio_block(
                conn, site.id, sensor, to_us(start) - audio_clips.LOOKBACK_US, to_us(end)
            )
            if first is None:
                continue
            begin = max(start, from_us(first))
            stop = min(end, begin + timedelta(seconds=audio_clips.MAX_CLIP_S))
            query = urllib.parse.urlencode({"from": format_ts(begin), "to": format_ts(stop)})
            path = f"/sites/{urllib.parse.quote(site.id)}/audio/{urllib.parse.quote(sensor)}.wav"
            clips.append(
                {
                    "sensor": sensor,
                    "from": format_ts(begin),
                    "to": format_ts(stop),
                    "seconds": f"{(stop - begin).total_seconds():g}",
                    "url": f"{path}?{query}",
                }
            )
        return clips

    def audio_clip(self, scope: Scope, site_id: str, sensor: str, start: datetime, end: datetime) -> bytes:
        """The WAV of ``sensor``'s raw audio in [start, end) as far as the account may see it (the
        site and time scope, else NotFound), every block's chain digest checked first
        (audio_clips.ClipRefused names a block that differs); NotFound without audio there."""
        site = scope.site(site_id)
        if sensor not in {s.id for s in site.sensors}:
            raise NotFound(f"no sensor {sensor!r} at {site.id}")
        start, end = scope.window(site, start, end)
        start_us, end_us = to_us(start), to_us(end)
        blocks = audio_clips.checked_blocks(self.store().conn, site.id, sensor, start_us, end_us)
        clip = audio_clips.cut(blocks, start_us, end_us)
        if clip is None:
            raise NotFound(f"no audio of {sensor} in this span")
        width = AUDIO_FORMATS[clip.sample_format][1]
        return wav_bytes(clip.pcm, clip.sample_rate, 8 * width, clip.sample_format.startswith("f"))

    # ------------------------------------------------------------------ evidence

    def export(self, scope: Scope, site_id: str, start: datetime, end: datetime, out: Path) -> dict[str, Any]:
        """An evidence bundle of ``site_id`` at ``out`` over [start, end) cut to the account's time
        scope, and what was made: the window as the bundle's manifest has it (exported_window: to
        the microsecond, which a scope's end held, a microsecond past not_after, has)."""
        from monitor.evidence import export_bundle, exported_window

        site = scope.site(site_id)
        start, end = scope.window(site, start, end)
        times = self.times(scope, site)
        shown = TOWN_VIEW if times is None else replace(TOWN_VIEW, time_scope=times)
        summary = export_bundle(
            self.config, site.id, start, end, out, plots=False, now=self.clock(), disclosure=shown
        )
        return {"site": site.id, **exported_window(out), "summary": repr(summary)}

    def sound_csv(
        self, scope: Scope, site_id: str, sensors: Sequence[str], start: datetime, end: datetime
    ) -> tuple[dict[str, Any], Iterator[bytes]]:
        """The stored sound periods of ``sensors`` (the site's sound meters; any other is
        refused) over [start, end) cut to the account's time scope: what was asked (for the
        record) and the CSV's lines, read from the store as they are sent. Header: the columns
        with their units; times in UTC and in site time; last, ``overload``: "1" for a second the
        meter was overloaded in (its levels read low: lower bounds), empty for the others, as in
        the evidence bundle. The text cells are written so that a spreadsheet runs none
        (csv_cells.inert, though configured ids never begin with '-')."""
        from monitor.csv_cells import inert
        from monitor.evidence.format import TimeFormat
        from monitor.journal.chain_kinds import SOUND_FIELDS, SOUND_UNITS

        site = scope.site(site_id)
        meters = [s.id for s in site.sensors if s.kind is SensorKind.SOUND]
        if not sensors:
            raise Refused(f"sensor: choose one or more of the site's sound meters ({', '.join(meters)})")
        foreign = [s for s in sensors if s not in meters]
        if foreign:
            raise Refused(
                f"sensor: {', '.join(foreign)} is not a sound meter of {site.id};"
                f" choose from {', '.join(meters)}"
            )
        if end - start > timedelta(days=MAX_CSV_DAYS):
            raise Refused(f"to: a CSV covers at most {MAX_CSV_DAYS} days; choose a shorter window")
        start, end = scope.window(site, start, end)
        # The evidence bundle's time cells (ISO 8601, "Z" / the site's offset).
        utc, local = TimeFormat(UTC), TimeFormat(ZoneInfo(site.timezone))
        chosen = [s for s in meters if s in sensors]  # the configuration's order, once each
        header = ["sensor", "time_utc", f"time_local ({site.timezone})", "duration (s)"]
        header += [f"{name} ({SOUND_UNITS[name]})" for name in SOUND_FIELDS] + ["source", "overload"]
        path = self.config.storage.path

        def lines() -> Iterator[bytes]:
            import csv
            import io

            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
            try:
                text = io.StringIO()
                out = csv.writer(text, lineterminator="\n")
                out.writerow(header)
                rows = queries.sound_seconds_of(conn, site.id, chosen, to_us(start), to_us(end))
                while batch := rows.fetchmany(5000):
                    for sensor, ts_us, duration, *levels, source, overload in batch:
                        out.writerow(
                            [
                                inert(sensor),
                                utc(ts_us),
                                local(ts_us),
                                repr(duration),
                                *("" if v is None else repr(v) for v in levels),
                                inert(source),
                                "1" if overload else "",
                            ]
                        )
                    yield text.getvalue().encode()
                    text.seek(0)
                    text.truncate()
                if text.tell():
                    yield text.getvalue().encode()
            finally:
                conn.close()

        # The window as the bundle's manifest and these rows write a time, to the microsecond.
        asked = {"from": utc(to_us(start)), "to": utc(to_us(end)), "sensors": chosen}
        return asked, lines()

    def published_anchors(self, scope: Scope, site_id: str) -> list[Any]:
        """The chain heads this installation published for the site (its record of what the Town
        received on ``{prefix}/{site}/anchors``), as `minewatch verify --anchors` reads them; of
        an account with a time scope, only those its scope allows (``TimeScope.anchors``): a
        verify must not tell it the chain's later length, heads or times."""
        from monitor.evidence import Anchor

        site = scope.site(site_id)
        published = queries.anchors(self.store().conn, site.id)
        if (times := self.times(scope, site)) is not None:
            published = times.anchors(published, lambda a: to_us(a.published))
        return [Anchor(a.site, a.seq, a.head, format_ts(a.published)) for a in published]

    def verify(
        self,
        path: Path,
        anchors_path: Path | None = None,
        anchors: Sequence[Any] | None = None,
        name: str = "",
    ) -> dict[str, Any]:
        """`minewatch verify` of the bundle at ``path``, against the anchors of the file at
        ``anchors_path`` or ``anchors`` (none: internal consistency only); ``lines`` are the
        command's own, the bundle named ``name`` instead of its temporary path."""
        from monitor.evidence import EvidenceError, load_anchors, verify_bundle

        if anchors_path is not None:
            try:
                anchors = load_anchors(anchors_path)
            except EvidenceError as exc:
                # The command's words ("anchors: <path>: ...") under the form field's name, once.
                said = str(exc).removeprefix("anchors: ").replace(str(anchors_path), "the file")
                raise Refused(f"anchors: {said}") from None
        report = verify_bundle(path, list(anchors) if anchors is not None else None)
        lines = report.lines()
        if name:  # the verdict starts with the bundle's path: say the name the person chose
            lines[0] = f"{name}: {lines[0].removeprefix(f'{report.bundle}: ')}"
        return {
            "ok": report.ok,
            "anchored": report.anchored,
            "anchors_given": report.town_anchors_given,
            "lines": lines,
            "format": report.format,
            "files_checked": report.files_checked,
            "rows_checked": dict(report.rows_checked),
            "chain_links": report.chain_links,
            "first_seq": report.first_seq,
            "last_seq": report.last_seq,
            "problems": [{"category": p.category, "message": p.message} for p in report.ranked],
            "more_problems": report.more_problems,
        }


@dataclass(frozen=True, slots=True)
class ComplaintForm:
    """A complaint as the public form gave it, checked (monitor/portal/complaint_pages.py)."""

    what: str
    start: datetime
    end: datetime
    address: str
    plan: tuple[float, float] | None
    description: str
    contact: Mapping[str, str]
    position: tuple[float, float] | None = None  # (latitude, longitude) clicked on the site plan


# What each reader sees of a complaint, named (an allow-list): the resident holding the
# reference its kind and status; the operator its site's complaints without the complainant's
# contact details; the Town everything, with the history (notes and who).
PUBLIC_COMPLAINT = ("id", "site_name", "what", "received", "status", "updated")
OPERATOR_COMPLAINT = (
    *PUBLIC_COMPLAINT,
    "site",
    "when",
    "start",
    "end",
    "address",
    "plan",
    "position",
    "description",
    "verdict",
    "verdict_text",
    "correlation",
    "notices",
)
TOWN_COMPLAINT = (*OPERATOR_COMPLAINT, "contact", "history")
COMPLAINT_FIELDS = {"public": PUBLIC_COMPLAINT, "operator": OPERATOR_COMPLAINT, "town": TOWN_COMPLAINT}


def _complaint_view(complaint: Any, config: Config, role: str, history: Sequence[Any] = ()) -> dict[str, Any]:
    from monitor.complaints.book import STATUS_LABELS
    from rules.complaints import CATEGORIES
    from rules.times import span_text

    site = config.site(complaint.site)
    tz = site.timezone if site else "UTC"
    everything = {
        "id": complaint.id,
        "site": complaint.site,
        "site_name": site.name if site else complaint.site,
        "what": CATEGORIES.get(complaint.what, complaint.what),
        "received": local_moment(complaint.received, tz),
        "status": STATUS_LABELS.get(complaint.status, complaint.status),
        "updated": local_moment(complaint.updated, tz),
        "when": span_text(complaint.start, complaint.end, tz, with_date=True)
        if complaint.end > complaint.start
        else local_moment(complaint.start, tz),
        "start": format_ts(complaint.start),
        "end": format_ts(complaint.end),
        "address": complaint.address,
        "plan": list(complaint.plan) if complaint.plan else None,
        "position": list(complaint.position) if complaint.position else None,
        "description": complaint.description,
        "verdict": complaint.correlation.get("verdict", ""),
        "verdict_text": complaint.correlation.get("text", ""),
        "correlation": dict(complaint.correlation),
        "notices": list(complaint.notices),
        "contact": dict(complaint.contact),
        "history": [
            {
                "seq": h.seq,
                "change": h.change,
                "status": STATUS_LABELS.get(h.status, h.status),
                "actor": h.actor,
                "note": h.note,
                "at": local_moment(h.at, tz),
                "notice": h.notice_id,
            }
            for h in history
        ],
    }
    return {name: everything[name] for name in COMPLAINT_FIELDS.get(role, PUBLIC_COMPLAINT)}


V = TypeVar("V")


class _ChainedWindows(Generic[V]):
    """Per (site, window): sensor -> bucket number -> value, with the buckets whose records were
    chained since the last look marked for reading again (see MinuteCache).

    A subclass says which records it follows (``_chained``) and how a range of its window is
    read (``_read``: every sensor's buckets in it, or one sensor's); ``_window`` does the rest.
    """

    BUCKET_US = 60_000_000
    MAX_WINDOWS = 64
    MAX_NEW_ENTRIES = 500_000  # beyond this, start over rather than walk the chain
    # A changed bucket is read again for its sensor alone, or (False) for every sensor at once,
    # where one query answers the bucket of all of them (HourCache).
    BY_SENSOR = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}
        # (site, start_us, end_us) -> sensor -> bucket number -> value; dict order = use order
        self._windows: dict[tuple[str, int, int], dict[str, dict[int, V]]] = {}
        self._dirty: dict[tuple[str, int, int], set[tuple[str, int]]] = {}

    def get(
        self, conn: sqlite3.Connection, site: str, sensors: Sequence[str], start_us: int, end_us: int
    ) -> dict[str, dict[int, V]]:
        """Sensor -> bucket number -> value, for ``sensors`` in [start_us, end_us) of ``site``."""
        return self._window(conn, site, sensors, start_us, end_us)

    def _window(
        self, conn: sqlite3.Connection, site: str, sensors: Sequence[str] | None, start_us: int, end_us: int
    ) -> dict[str, dict[int, V]]:
        """A copy of the window, up to date: read whole the first time (or when ``sensors``
        changed; None: whichever sensors the rows name), then only its changed buckets."""
        with self._lock:
            self._catch_up(conn, site)
            key = (site, start_us, end_us)
            window = self._windows.pop(key, None)
            if window is None or (sensors is not None and set(window) != set(sensors)):
                window = {} if sensors is None else {s: {} for s in sensors}
                self._read(conn, site, window, start_us, end_us, None)
                self._dirty[key] = set()
            dirty = self._dirty.pop(key, set())
            changed = sorted(dirty) if self.BY_SENSOR else sorted({(None, b) for _, b in dirty})
            for sensor, bucket in changed:
                lo = max(bucket * self.BUCKET_US, start_us)
                hi = min((bucket + 1) * self.BUCKET_US, end_us)
                for name, values in window.items():
                    if sensor is None or name == sensor:
                        values.pop(bucket, None)
                if sensor is None or sensor in window or sensors is None:
                    self._read(conn, site, window, lo, hi, sensor)
            self._keep(key, window)
            return {s: dict(v) for s, v in window.items()}

    def _read(
        self,
        conn: sqlite3.Connection,
        site: str,
        window: dict[str, dict[int, V]],
        start_us: int,
        end_us: int,
        sensor: str | None,
    ) -> None:
        """Fill ``window``'s buckets in [start_us, end_us) for ``sensor`` (None: every sensor)."""
        raise NotImplementedError

    def _keep(self, key: tuple[str, int, int], window: dict[str, dict[int, V]]) -> None:
        self._dirty[key] = set()
        self._windows[key] = window
        while len(self._windows) > self.MAX_WINDOWS:
            oldest = next(iter(self._windows))
            del self._windows[oldest]
            self._dirty.pop(oldest, None)

    def _catch_up(self, conn: sqlite3.Connection, site: str) -> None:
        head = queries.chain_head_seq(conn, site)
        seen = self._seq.get(site)
        self._seq[site] = head
        mine = [k for k in self._windows if k[0] == site]
        if seen is None or head - seen > self.MAX_NEW_ENTRIES or head < seen:
            for k in mine:  # unknown changes: read those windows again
                del self._windows[k]
                self._dirty.pop(k, None)
            return
        if head == seen or not mine:
            return
        for sensor, ts_us in self._chained(conn, site, seen, head):
            for k in mine:
                if k[1] <= ts_us < k[2]:
                    self._dirty.setdefault(k, set()).add((sensor, ts_us // self.BUCKET_US))

    def _chained(
        self, conn: sqlite3.Connection, site: str, seen: int, head: int
    ) -> Iterator[tuple[str, int]]:
        """(sensor, ts_us) of the records of the kept kind chained in (seen, head]: sound seconds."""
        return queries.sound_seconds_chained(conn, site, seen, head)


class MinuteCache(_ChainedWindows[float]):
    """Minute LAeq of (site, sensor) windows, kept up to date from the site's hash chain.

    A day of one meter is 86,400 rows: 30-50 ms to aggregate, so 20 clients on the day view of
    ten meters would each wait seconds. Every stored second has a chain entry keyed
    ``sensor|ts_us`` in the site's chain, so the entries chained since the last look name
    exactly the minutes that changed (late data too); only those are read again. The chain is
    read before the rows, so a row is never newer in the cache than the chain position noted.
    """

    def _read(
        self,
        conn: sqlite3.Connection,
        site: str,
        window: dict[str, dict[int, float]],
        start_us: int,
        end_us: int,
        sensor: str | None,
    ) -> None:
        if sensor is None:
            for name, minute, value in queries.minute_laeq_of_site(conn, site, start_us, end_us):
                if name in window:
                    window[name][minute] = value
            return
        laeq = queries.minute_laeq_of_sensor(conn, site, sensor, start_us, end_us)
        if laeq is not None:
            window[sensor][start_us // self.BUCKET_US] = laeq


HourLevels = tuple[int, float, float, float]  # seconds, LAeq, L10, L90 (queries.hourly_levels_of_site)


class HourCache(_ChainedWindows[HourLevels]):
    """Hourly LAeq, L10 and L90 of (site, sensor) windows (weeks, months), kept up to date from
    the site's hash chain as :class:`MinuteCache` keeps minutes: only the hours whose seconds
    were chained since the last look are read again (that hour of every meter at once), from
    the hourly histograms the store keeps (queries.hourly_levels_of_site), not the seconds."""

    BUCKET_US = 3_600_000_000
    MAX_WINDOWS = 16
    BY_SENSOR = False

    def _read(
        self,
        conn: sqlite3.Connection,
        site: str,
        window: dict[str, dict[int, HourLevels]],
        start_us: int,
        end_us: int,
        sensor: str | None,
    ) -> None:
        for r in queries.hourly_levels_of_site(conn, site, start_us, end_us):
            if r["sensor"] in window:
                window[r["sensor"]][r["hour"]] = (int(r["seconds"]), r["laeq"], r["l10"], r["l90"])


LightLevels = tuple[float, float]  # mean and highest lux of a slot (queries.light_levels)


class LightCache(_ChainedWindows[LightLevels]):
    """Mean and highest lux per slot (a minute or an hour: ``step_s``) of the light and sky
    sensors' light readings in (site, window)s, kept up to date from the site's hash chain as
    :class:`MinuteCache` keeps minutes: only the slots whose readings were chained since the
    last look are read again, not the month's readings at each new record of the site."""

    MAX_WINDOWS = 16

    def __init__(self, step_s: int) -> None:
        super().__init__()
        self.step_s = step_s
        self.BUCKET_US = step_s * 1_000_000

    def _chained(
        self, conn: sqlite3.Connection, site: str, seen: int, head: int
    ) -> Iterator[tuple[str, int]]:
        return queries.readings_chained(conn, site, ("light",), seen, head)

    def _read(
        self,
        conn: sqlite3.Connection,
        site: str,
        window: dict[str, dict[int, LightLevels]],
        start_us: int,
        end_us: int,
        sensor: str | None,
    ) -> None:
        for name in window if sensor is None else (sensor,):
            for r in queries.light_levels(conn, site, "light", name, start_us, end_us, self.step_s):
                if r["lux_mean"] is not None:
                    window[name][r["slot"]] = (r["lux_mean"], r["lux_max"])


class CountCache(_ChainedWindows[int]):
    """How many readings (light, weather, turbidity, seismic: COUNTED_KINDS) each sensor sent in
    (site, window)s, kept per clock hour and followed through the site's hash chain as
    :class:`LightCache` follows light readings: a reading chained since makes its sensor's
    hour be counted again, not the month's readings (a month of one light sensor at 10 s:
    259,200 rows, ~0.1 s of CPU to count) at each new record of the site."""

    BUCKET_US = 3_600_000_000
    MAX_WINDOWS = 16
    COUNTED_KINDS = ("light", "weather", "turbidity", "seismic")

    def _chained(
        self, conn: sqlite3.Connection, site: str, seen: int, head: int
    ) -> Iterator[tuple[str, int]]:
        return queries.readings_chained(conn, site, self.COUNTED_KINDS, seen, head)

    def sensor_counts(
        self, conn: sqlite3.Connection, site: str, start_us: int, end_us: int
    ) -> dict[str, int]:
        """Sensor -> its readings of COUNTED_KINDS starting in [start_us, end_us)."""
        window = self._window(conn, site, None, start_us, end_us)
        return {sensor: sum(hours.values()) for sensor, hours in window.items() if hours}

    def _read(
        self,
        conn: sqlite3.Connection,
        site: str,
        window: dict[str, dict[int, int]],
        start_us: int,
        end_us: int,
        sensor: str | None,
    ) -> None:
        for r in queries.hourly_reading_counts(conn, site, self.COUNTED_KINDS, start_us, end_us):
            if sensor is None or r["sensor"] == sensor:
                window.setdefault(r["sensor"], {})[r["hour"]] = int(r["readings"])


# A day view: site, the period asked (start, end us), the window shown (us), the reader's time scope.
DayKey = tuple[str, int, int, int, int, TimeScope | None]


class DayCache:
    """Day views (data and plot) by (site, day, start_us, end_us, the reader's TimeScope or
    None), each with the chain head it was computed at. One computation per key at a time:
    twenty clients asking for the same changed day wait for one computation instead of each
    doing it."""

    # A view of ten meters with 4,800 findings holds about 10 MB (measured with tracemalloc,
    # its minute window and findings included).
    MAX_VIEWS = 8
    MAX_PAGES = 16  # rendered pages of a view (the day view's: one per choice of filters)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[DayKey, _DayView] = {}  # dict order = use order

    def get(
        self,
        key: DayKey,
        head: Callable[[], int],
        compute: Callable[[], dict[str, Any]],
        page: Callable[[dict[str, Any], str], str] | None = None,
    ) -> tuple[dict[str, Any], str]:
        with self._lock:
            view = self._views.pop(key, None) or _DayView()
            self._views[key] = view
            while len(self._views) > self.MAX_VIEWS:
                del self._views[next(iter(self._views))]
        with view.lock:
            # The head is read before the day: a record stored meanwhile leaves the view one
            # head behind, so the next request computes again (never a newer head on older data).
            now = head()
            if view.head != now or view.data is None:
                data = compute()
                view.svg = view.plot.render(data)
                view.data, view.head = data, now
                view.pages.clear()
            if page is None:
                return view.data, view.svg
            text = view.pages.pop(page, None)
            if text is None:
                text = page(view.data, view.svg)
            view.pages[page] = text  # dict order = use order
            while len(view.pages) > self.MAX_PAGES:
                del view.pages[next(iter(view.pages))]
            return view.data, text


@dataclass
class _DayView:
    lock: threading.Lock = field(default_factory=threading.Lock)
    head: int = -1
    data: dict[str, Any] | None = None
    svg: str = ""
    plot: DayPlot = field(default_factory=lambda: DayPlot())
    pages: dict[Callable[[dict[str, Any], str], str], str] = field(default_factory=dict)


_FindingsKey = tuple[str, int, int, TimeScope | None]  # site, window, the reader's time scope


class FindingsCache:
    """Findings of (site, start_us, end_us) windows and their JSON, kept while no finding has been
    stored. Findings are only ever inserted (a change is a new revision row), so the largest
    rowid of the table names the state: one O(1) lookup per request instead of decoding every
    finding of the day again."""

    MAX_WINDOWS = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (largest rowid when read, findings, JSON body); dict order = use order
        self._windows: dict[
            tuple[str, int, int, TimeScope | None], tuple[int, list[dict[str, Any]], bytes]
        ] = {}

    def get(
        self,
        conn: sqlite3.Connection,
        site: str,
        start: datetime,
        end: datetime,
        shown: TimeScope | None = None,
        zone: tzinfo = UTC,
    ) -> tuple[list[dict[str, Any]], bytes]:
        """The findings starting in [start, end); with a reader's time scope ``shown``, only those
        ``TimeScope.shows`` (kept apart from the unscoped ones: another key), their texts' site
        times read in ``zone``, the site's."""
        key = (site, to_us(start), to_us(end), shown)
        # Read before the rows: a finding stored in between makes the next request read again.
        version = queries.findings_version(conn)
        with self._lock:
            entry = self._windows.pop(key, None)
            if entry is not None and entry[0] == version:
                self._windows[key] = entry
                return entry[1], entry[2]
        # Only the fields shown: a finding's data also lists every reading it used. Unpacked by
        # position: looking 10 columns up by name costs a tenth more on 4,800 findings.
        rows = queries.current_findings(conn, site=site, start=start, end=end, without_data=True)
        found = [
            {
                "id": finding_id,
                "kind": kind,
                "standard": standard,
                "section": section,
                "start": format_ts(from_us(start_us)),
                "end": format_ts(from_us(end_us)),
                "summary": summary if summary is not None else "",
                "sensors": list(json.loads(sensors)) if sensors is not None else [],
                # The window its summary tells (noise: the worst 60 s), where it is not the span.
                "window_start": window_start,
                "window_end": window_end,
            }
            for (
                finding_id,
                kind,
                standard,
                section,
                start_us,
                end_us,
                summary,
                sensors,
                window_start,
                window_end,
            ) in rows
        ]
        if shown is not None and found:
            full = {r["id"]: r for r in queries.current_findings(conn, site=site, start=start, end=end)}
            found = [
                f
                for f in found
                if f["id"] in full and shown.shows(conn, site, "finding", full[f["id"]], zone)
            ]
        # Encoded as starlette's JSONResponse does, so the API's bytes are unchanged.
        body = json.dumps(found, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        with self._lock:
            self._windows[key] = (version, found, body.encode())
            while len(self._windows) > self.MAX_WINDOWS:
                del self._windows[next(iter(self._windows))]
        return found, body.encode()


class LiveCache:
    """Values read from the store as of a moment (the operator's status, live status and status
    page), per key, each with the version it was computed at: the site's chain head and the
    moment (Portal._live_version). While the version is unchanged a request gets the kept value;
    one computation per key at a time, so twenty clients asking within the same second wait for
    one computation instead of each doing it. The keys name the site, the windows the account's
    scope allows and what its reader sees (its Sight: audience and TimeScope), never the account."""

    MAX_ENTRIES = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, ...], _Kept] = {}  # dict order = use order

    def get(
        self, key: tuple[Any, ...], version: Callable[[], tuple[int, int]], compute: Callable[[], T]
    ) -> T:
        with self._lock:
            kept = self._entries.pop(key, None) or _Kept()
            self._entries[key] = kept
            while len(self._entries) > self.MAX_ENTRIES:
                del self._entries[next(iter(self._entries))]
        with kept.lock:
            # The version is read before the value: a record stored meanwhile leaves the value
            # one head behind, so the next request computes again (never a newer head on older data).
            now = version()
            if kept.version != now:
                kept.value = compute()
                kept.version = now
            value: T = kept.value
            return value


@dataclass
class _Kept:
    lock: threading.Lock = field(default_factory=threading.Lock)
    version: tuple[int, int] | None = None
    value: Any = None


_UTC_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


@functools.lru_cache(maxsize=1 << 16)  # 45 days of minutes; a day view formats 1,440 per meter
def _minute_ts(minute: int) -> str:
    return format_ts(from_us(minute * 60_000_000))


@functools.lru_cache(maxsize=1 << 12)
def _hour_ts(hour: int) -> str:
    return format_ts(from_us(hour * 3_600_000_000))


def _day_start(day: date, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, dtime(0), tz).astimezone(UTC)


def local_day(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    start = datetime.combine(day, dtime(0), tz).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), dtime(0), tz).astimezone(UTC)
    return start, end


def _violations_shown(
    conn: sqlite3.Connection, site: str, shown: TimeScope | None, zone: tzinfo
) -> ViolationsBetween | None:
    """The violations an episode is made of as a time-scoped reader may see them (``TimeScope.shows``:
    a violation reporting a time outside the scope is no part of its episodes); None: unscoped,
    the store's own choice."""
    if shown is None:
        return None

    def between(start: datetime, end: datetime) -> list[Any]:
        rows = queries.current_findings(
            conn, site=site, start=start, end=end, kinds=[FindingKind.VIOLATION.value]
        )
        return [
            finding_from_json(json.loads(r["data"]))
            for r in rows
            if shown.shows(conn, site, "finding", r, zone)
        ]

    return between


def _newest_shown(
    newest: Callable[[int, int], list[sqlite3.Row]],
    shown: Callable[[str, Mapping[str, Any] | sqlite3.Row], bool] | None,
    kind: str,
    limit: int,
) -> list[sqlite3.Row]:
    """The first ``limit`` rows of ``kind`` that ``newest(offset, count)`` reads, newest first,
    that ``shown`` shows (None: every row): read a page at a time past those it does not show."""
    if shown is None:
        return newest(0, limit)
    kept: list[sqlite3.Row] = []
    seen: set[Any] = set()  # a row raised while the pages are read moves the next page's rows on
    for r in _every_row(newest, max(limit, 100)):
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        if shown(kind, r):
            kept.append(r)
            if len(kept) == limit:
                break
    return kept


def _every_row(page: Callable[[int, int], list[sqlite3.Row]], count: int = 1000) -> Iterator[sqlite3.Row]:
    """Every row ``page(offset, count)`` reads, a page at a time (a row stored while the pages are
    read may move one a page on: it is read twice, never left out)."""
    offset = 0
    while True:
        rows = page(offset, count)
        yield from rows
        if len(rows) < count:
            return
        offset += count


def _retry(write: Callable[[], T], attempts: int = 5) -> T:
    """A write that met the daemon's write lock past the busy timeout is tried again."""
    for attempt in range(attempts):
        try:
            return write()
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def new_event_id(kind: str) -> str:
    return f"portal-{kind}-{uuid.uuid4().hex[:12]}"
