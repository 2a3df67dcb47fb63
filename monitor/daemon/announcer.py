"""What the daemon tells the world after judging: findings, notices, early warnings, status, anchors.

Everything here is written in the caller's transaction (store records, alerts, InfluxDB
points) and the MQTT messages are queued in ``Outgoing``, published only once the
transaction has committed (``Outgoing.flush``): a message never announces what a
rollback took back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

import rules
from monitor.daemon.rejections import LogGate
from monitor.daemon.site_state import SiteState, site_data
from monitor.daemon.site_status import site_status  # the retained status message (also `minewatch status`)
from monitor.daemon.status_findings import StatusFindings
from monitor.influx import points
from monitor.influx.points import WritePoint
from monitor.journal.site_law import site_law_of, vibration_params
from monitor.journal.store import Store
from monitor.notify.alerts import EARLY_WARNING_AUDIENCES, Alert, AlertBook
from monitor.notify.notices import NoticeBook, NoticeEvent, violation_alert_text
from monitor.wire.canonical import to_us
from monitor.wire.codec import finding_to_json
from monitor.wire.protocol import format_ts, output_topic
from rules.model import Blast, BlastNotice, Finding, FindingKind, SiteLawPoint
from rules.scaled_distance import pending_notices
from rules.times import floor_minute

log = logging.getLogger("minewatch.pipeline")

TOWN_KINDS = frozenset(
    {
        FindingKind.VIOLATION,
        FindingKind.SAFETY_EXCEPTION,
        FindingKind.UNREPORTED_BLAST,
    }
)
EVENT_REF_KINDS = frozenset({"blast", "blast-notice", "truck", "work", "temporary-lighting", "event"})
Publish = Callable[[str, bytes, bool], None]  # topic, payload, retain


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), default=str).encode()


def _notice_json(payload: Mapping[str, Any]) -> bytes:
    """The ``…/notices`` topic body, compact JSON; names and texts kept in UTF-8, not escaped."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str).encode()


class Outgoing:
    """The MQTT messages of the current transaction, published after it commits."""

    def __init__(self, prefix: str, publish: Publish) -> None:
        self.prefix = prefix
        self.publish = publish
        self.messages: list[tuple[str, bytes, bool]] = []
        self.failures = LogGate()

    def add(self, site: str, kind: str, body: Mapping[str, Any], *, retain: bool = False) -> None:
        self.add_payload(site, kind, _json(body), retain=retain)

    def add_payload(self, site: str, kind: str, payload: bytes, *, retain: bool = False) -> None:
        self.messages.append((output_topic(site, kind, self.prefix), payload, retain))

    def clear(self) -> None:
        self.messages.clear()

    @contextmanager
    def unit(self, savepoint: AbstractContextManager[None]) -> Iterator[None]:
        """A store savepoint and the messages queued inside it, kept or dropped together: a
        message never announces what a rollback took back."""
        held = len(self.messages)
        try:
            with savepoint:
                yield
        except BaseException:
            del self.messages[held:]
            raise

    def flush(self) -> None:
        outgoing, self.messages = self.messages, []
        for topic, payload, retain in outgoing:
            try:
                self.publish(topic, payload, retain)
            except Exception as exc:  # an output failure must not stop ingestion; the store has it
                held = self.failures.admit((topic, "", ""))  # a line per topic a minute, not per message
                if held is not None:
                    more = f" ({held} more not published in the last minute)" if held else ""
                    log.error("Could not publish to %r: %s%s", topic, exc, more)


class Announcer:
    def __init__(
        self,
        store: Store,
        alerts: AlertBook,
        notices: NoticeBook,
        outgoing: Outgoing,
        write_point: WritePoint,
    ) -> None:
        self.store = store
        self.alerts = alerts
        self.notices = notices
        self.outgoing = outgoing
        self.write_point = write_point
        self._site_laws: dict[str, tuple[datetime, tuple[SiteLawPoint, ...]]] = {}  # site -> (minute, law)
        self.status_findings: dict[str, StatusFindings] = {}  # site -> what its status tells, followed

    # ------------------------------------------------------------------ findings

    def record_findings(
        self, state: SiteState, minute: datetime, findings: list[Finding], now: datetime
    ) -> int:
        """Store a judged minute's findings, announce the new and changed ones, retract the withdrawn.

        Returns how many findings (or revisions) were stored.
        """
        site = state.config.id
        window = f"{site}|{to_us(minute)}"
        previous = set(json.loads(self.store.meta(f"window:{window}") or "[]"))
        current = {f.id for f in findings}
        stored: list[Finding] = [f for f in findings if self.store.append_finding(f, now)]
        # Violation episodes open notices (section 13.3.A) or continue / escalate them, before
        # the findings are alerted: a violation's alert tells its episode as the notice does.
        events = self.notices.on_findings(state.config, state.profile, stored, now)
        for finding in stored:
            # A revision (the minute re-judged with late data) is published, not alerted again:
            # people were told of the finding when it was made.
            standard = state.profile.standards.get(finding.standard)
            title = standard.title if standard is not None else ""
            self._announce(site, finding, now, alert=finding.id not in previous, title=title)
        for event in events:
            self.notice_event(event, now)
        for gone in previous - current:
            self._retract(site, gone, now)
        if current != previous:
            self.store.set_meta(f"window:{window}", json.dumps(sorted(current)))
        return len(stored)

    def _retract(self, site: str, finding_id: str, now: datetime) -> None:
        finding = self.store.latest_finding(finding_id)
        if finding is None:
            return
        if self.store.append_finding(finding, now, retracted=True):
            self.notices.on_retracted(site, finding_id)
            self.outgoing.add(site, "findings", {**finding_to_json(finding), "retracted": True})

    def _announce(self, site: str, finding: Finding, now: datetime, *, alert: bool, title: str = "") -> None:
        body = finding_to_json(finding)
        self.outgoing.add(site, "findings", body)
        self.write_point(points.findings, finding)
        if finding.kind is FindingKind.VIOLATION:
            self.outgoing.add(site, "violations", body)
        if not alert:
            return
        sensors = ",".join(finding.sensors)
        message = finding.summary
        if finding.kind is FindingKind.VIOLATION:
            told = self.notices.episode_of(site, finding.id)
            if told is not None:
                body = {**body, "episode_id": told[1].get("episode_id"), "notice_id": told[0]}
                message = violation_alert_text(told[1], told[0], title)
        if finding.kind in TOWN_KINDS:
            # One alert per standard, sensors and event while it keeps recurring (a noisy half
            # hour is one alert, not thirty); AlertBook clears it after min_gap_s of quiet.
            events = ",".join(r for r in finding.refs if r.split(":")[0] in EVENT_REF_KINDS)
            condition = f"{finding.kind.value}:{finding.standard}:{sensors}:{events}"
            severity = "violation" if finding.kind is FindingKind.VIOLATION else "notice"
            audiences = ("town", "operator")
            self.alerts.raise_(
                Alert(site, audiences, finding.kind.value, severity, condition, message, body), now
            )
        elif finding.kind is FindingKind.WARNING:
            condition = f"warning:{finding.standard}:{sensors}"
            self.alerts.raise_(
                Alert(site, ("operator",), "warning", "warning", condition, finding.summary, body), now
            )

    def notice_event(self, event: NoticeEvent, now: datetime) -> None:
        """A notice change: alerted (never deduplicated) and its payload on …/{site}/notices."""
        self.alerts.raise_(event.alert, now, dedupe=False)
        self.outgoing.add_payload(event.site, "notices", _notice_json(event.payload))

    def early_warnings(self, state: SiteState, now: datetime) -> None:
        """Operator alerts for what is approaching a limit, once per warning and minute."""
        minute = floor_minute(now)
        data = site_data(state, self.store, minute, now, site_law=self._site_law(state, now))
        for finding in rules.early_warnings(state.config.context(), state.profile, data, now):
            key = (finding.id, minute)
            if key in state.warned_minutes:
                continue
            state.warned_minutes.add(key)
            # Per sensor, or per blast notice for warnings about a pending blast (several may be).
            notices = [r for r in finding.refs if r.startswith("notice:")]
            subject = ",".join(finding.sensors) or ",".join(notices)
            condition = f"early:{finding.standard}:{subject}"
            alert = Alert(
                state.config.id,
                EARLY_WARNING_AUDIENCES,
                "early_warning",
                "warning",
                condition,
                finding.summary,
                finding_to_json(finding),
            )
            self.alerts.raise_(alert, now)
        state.warned_minutes = {k for k in state.warned_minutes if k[1] >= minute - timedelta(hours=1)}

    def _site_law(self, state: SiteState, now: datetime) -> tuple[SiteLawPoint, ...]:
        """The site's recorded blasts as its site law, read from the journal only while a pending
        blast notice carries a charge per delay and distance (nothing to forecast otherwise)."""
        params = vibration_params(state.profile)
        if params is None:
            return ()
        notices = [e for e in state.events if isinstance(e, BlastNotice)]
        fired = {e.id for e in state.events if isinstance(e, Blast)}
        if not pending_notices(notices, fired, now):
            return ()
        # Once per site and data minute: the early warnings run every tick, the record of
        # blasts changes a few times a day.
        minute = floor_minute(now)
        cached = self._site_laws.get(state.config.id)
        if cached is None or cached[0] != minute:
            cached = (minute, site_law_of(self.store, state.config, params))
            self._site_laws[state.config.id] = cached
        return cached[1]

    # ------------------------------------------------------------------ periodic messages

    def status(self, state: SiteState, now: datetime, interval_s: float) -> None:
        """The retained …/status, at most every ``interval_s``."""
        if state.last_status and (now - state.last_status).total_seconds() < interval_s:
            return
        state.last_status = now
        online = {s: h.online for s, h in state.health.items()}
        titles = state.profile.titles
        site = state.config.id
        findings = self.status_findings.get(site)
        if findings is None:
            findings = self.status_findings[site] = StatusFindings(self.store, site)
        body = site_status(
            self.store,
            state.config,
            now,
            online,
            episode_gap_s=state.profile.episode_gap_s,
            titles=titles,
            findings=findings,
        )
        self.outgoing.add(state.config.id, "status", body, retain=True)

    def anchor(self, state: SiteState, now: datetime, interval_s: float) -> None:
        """The chain head, at most every ``interval_s``: recorded, retained on …/anchors, told the town."""
        if state.last_anchor and (now - state.last_anchor).total_seconds() < interval_s:
            return
        state.last_anchor = now
        site = state.config.id
        seq, head = self.store.head(site)
        if seq == 0:
            return
        self.store.record_anchor(site, seq, head, now)
        self.store.restate_config(site, now)  # first entry after the anchor: every evidence segment holds it
        body = {"site": site, "seq": seq, "head": head, "ts": format_ts(now)}
        self.outgoing.add(site, "anchors", body, retain=True)
        message = f"Evidence chain of {site} at record {seq}: {head}"
        self.alerts.raise_(
            Alert(site, ("town",), "anchor", "info", f"anchor:{seq}", message, body), now, dedupe=False
        )
