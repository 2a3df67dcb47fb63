"""Notices of violation: the profile's cure procedure (Dovre 13.3.A) as a lifecycle in the store.

    findings ─► on_findings ─► rules.episodes.update_episodes ─► episode working set (table)
                                  │
                                  ├─ no open notice for (site, standard) ─► OPENED  (id DOV-2026-0007,
                                  │                                           deadline: end of the local
                                  │                                           day cure_days after issue)
                                  ├─ open notice, before its deadline    ─► CONTINUING violation attached
                                  └─ open notice, after its deadline     ─► ESCALATED: citation recommended
                                                                            (the profile's [notice]
                                                                            consequence_section), to the town
    town / operator (CLI) ─► request_extension ─► extend ─► close (corrected) | escalate

Statuses::

    open ──► extension_requested ──► extended ──► corrected
      │              │                  │  ▲
      │              └──────────────────┼──┘ (another request, another extension)
      └──────────────┴──────────────────┴──► escalated ──► corrected

Deadlines (13.3.A) are computed in ``rules.deadlines``: the end of the site's local day
``cure_days`` days after the day of issue, moved off a Sunday or legal holiday when the
profile says so (``cure_next_business_day``; the calendar is kept with the notice so an
extension rolls the same way). An extension records the extra time and the new deadline.
Manual changes refuse a time before the notice was issued, and a manual escalation before
the current deadline needs an explicit reason (13.3.B applies after it). Notice ids are
matched without regard to case.

Every change is a row of ``notice_changes`` (who, when, note, the deadline after it) and
a record in the site's hash chain, so the evidence export proves the procedure. Rows are
append-only: the ``notices`` row keeps the current status and deadline for queries, but
the chained facts of the notice are its immutable columns (see :func:`notice_record`)
and every later state is a chained change. Episodes attached to a notice are
append-only revisions too (an episode grows minute by minute).

No in-memory state: a restart, or a CLI command in another process, reads the tables.
Changes made outside the daemon (the CLI) are announced by the daemon on its next tick
through :meth:`NoticeBook.take_announcements`. Nothing here reads the clock: ``now`` is
passed in.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.errors import MinewatchError
from monitor.journal import migrations, queries
from monitor.journal.chain_kinds import change_record as change_record
from monitor.journal.chain_kinds import episode_record as episode_record
from monitor.journal.chain_kinds import notice_record as notice_record
from monitor.journal.store import Store
from monitor.notify.alerts import Alert
from monitor.wire.canonical import canonical_text, from_us, to_us
from monitor.wire.codec import finding_from_json, finding_to_json
from monitor.wire.protocol import format_ts, parse_ts
from rules.citation import citation_text
from rules.deadlines import (
    MAX_EXTRA_DAYS,
    WorkCalendar,
    after_deadline,
    cure_deadline,
    deadline_words,
    extended_deadline,
    extra_days_problem,
)
from rules.episodes import (
    Episode,
    EpisodeFacts,
    EpisodeFold,
    measurement_json,
    update_episodes,
)
from rules.model import Finding, FindingKind, Measurement
from rules.notice_decision import (
    ACTIVE_STATUSES,
    CORRECTED,
    CURE_STATUSES,
    ESCALATED,
    EXTENDED,
    EXTENSION_REQUESTED,
    OPEN,
    Action,
    Reminder,
    decide,
    reminder_due,
)
from rules.profile import Profile
from rules.quantities import limit_text, measurement_text, number_text, quantity_text, unit_text
from rules.times import duration_text, local_moment, local_stamp, span_text, stored_time

__all__ = [
    "ACTIVE_STATUSES",
    "AUTO_ACTOR",
    "EarlyEscalation",
    "InvalidTransition",
    "Notice",
    "NoticeBook",
    "NoticeChange",
    "NoticeEpisode",
    "NoticeError",
    "NoticeEvent",
    "UnknownNotice",
    "change_record",
    "changes_allowed",
    "duration_text",
    "episode_record",
    "episode_window",
    "get_notice",
    "limit_text",
    "list_notices",
    "measurement_text",
    "notice_history",
    "notice_record",
    "number_text",
    "quantity_text",
    "service_text",
    "unit_text",
]


AUTO_ACTOR = "minewatch"
# Which status each manual change may start from.
_ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    EXTENSION_REQUESTED: (OPEN, EXTENDED),
    EXTENDED: (OPEN, EXTENSION_REQUESTED, EXTENDED),
    CORRECTED: (OPEN, EXTENSION_REQUESTED, EXTENDED, ESCALATED),
    ESCALATED: (OPEN, EXTENSION_REQUESTED, EXTENDED),
}
# Episodes stay in the working set this long after their end, so late data can still merge
# into them (merging itself only happens within the profile's episode_gap_s).
_WORKING_RETENTION = timedelta(days=1)


class NoticeError(MinewatchError):
    """A notice operation that cannot be done; the message is one line for the CLI."""


class UnknownNotice(NoticeError):
    pass


class InvalidTransition(NoticeError):
    pass


class EarlyEscalation(InvalidTransition):
    """Escalating before the cure deadline without a reason: each front end says how to give one."""

    def __init__(self, reason_missing: str, remedy: str = "give --before-deadline --reason TEXT") -> None:
        super().__init__(f"{reason_missing}; to escalate anyway, {remedy}")
        self.reason_missing = reason_missing


def changes_allowed(status: str, history: Sequence[NoticeChange] = ()) -> dict[str, bool]:
    """Which manual changes a notice in ``status`` with ``history`` allows (the forms a page
    offers): the Town's serve (once), extend, close and escalate, and the operator's request for
    more time."""
    return {
        "request_extension": status in _ALLOWED_FROM[EXTENSION_REQUESTED],
        "serve": status in CURE_STATUSES and not any(c.change == "served" for c in history),
        "extend": status in _ALLOWED_FROM[EXTENDED],
        "close": status in _ALLOWED_FROM[CORRECTED],
        "escalate": status in _ALLOWED_FROM[ESCALATED],
    }


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    """Something the pipeline raises as an alert and publishes on ``{prefix}/{site}/notices``."""

    notice_id: str
    site: str
    change: str  # "opened" | "continuing" | "escalated" | "extension_requested" | "extended" | "corrected"
    seq: int  # the change's number within the notice
    audiences: tuple[str, ...]
    kind: str  # alert kind
    severity: str
    message: str
    payload: Mapping[str, Any]

    @property
    def condition(self) -> str:
        """A unique alert condition: each change alerts once, never suppressed by another."""
        return f"notice:{self.notice_id}:{self.seq}"

    @property
    def alert(self) -> Alert:
        return Alert(
            self.site,
            self.audiences,
            self.kind,
            self.severity,
            self.condition,
            self.message,
            dict(self.payload),
        )


@dataclass(frozen=True, slots=True)
class NoticeEpisode:
    episode_id: str
    start: datetime
    end: datetime
    finding_ids: tuple[str, ...]
    facts: Mapping[str, Any]  # see facts_json
    revision: int


@dataclass(frozen=True, slots=True)
class _Working:
    """An episode of the working set (``notice_open_episodes``): the notice telling it, and its
    facts so far (``EpisodeFold.to_json``; None: to be folded again from its findings)."""

    episode: Episode
    notice_id: str
    fold: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class NoticeChange:
    notice_id: str
    seq: int
    change: str
    status: str  # status after the change
    actor: str
    note: str
    at: datetime
    deadline: datetime  # deadline after the change
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice:
    id: str
    site: str
    standard: str
    section: str
    status: str
    opened: datetime  # issue time
    first_deadline: datetime  # issue + cure_days
    deadline: datetime  # current (after extensions)
    data: Mapping[str, Any]  # the notice as issued: parties, standard text, required action
    episodes: tuple[NoticeEpisode, ...] = ()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def timezone(self) -> str:
        return str(self.data.get("timezone", "UTC"))


# --------------------------------------------------------------------------- reads (any connection)


def _row_to_notice(conn: sqlite3.Connection, row: Mapping[str, Any]) -> Notice:
    return Notice(
        id=row["id"],
        site=row["site"],
        standard=row["standard"],
        section=row["section"],
        status=row["status"],
        opened=from_us(row["opened_us"]),
        first_deadline=from_us(row["first_deadline_us"]),
        deadline=from_us(row["deadline_us"]),
        data=json.loads(row["data"]),
        episodes=tuple(_current_episodes(conn, row["id"])),
    )


def _current_episodes(conn: sqlite3.Connection, notice_id: str) -> list[NoticeEpisode]:
    rows = conn.execute(
        "SELECT e.* FROM notice_episodes e JOIN (SELECT episode_id, MAX(revision) AS revision"
        " FROM notice_episodes WHERE notice_id = ? GROUP BY episode_id) last"
        " ON e.episode_id = last.episode_id AND e.revision = last.revision"
        " WHERE e.notice_id = ? ORDER BY e.start_us, e.episode_id",
        (notice_id, notice_id),
    ).fetchall()
    episodes = []
    for r in rows:
        facts = json.loads(r["data"])
        if facts.get("replaced_by"):
            continue  # merged into a later revision of the story
        episodes.append(
            NoticeEpisode(
                r["episode_id"],
                from_us(r["start_us"]),
                from_us(r["end_us"]),
                tuple(json.loads(r["finding_ids"])),
                facts,
                r["revision"],
            )
        )
    return episodes


def _ensure_schema(conn: sqlite3.Connection) -> None:
    # Only outside a transaction (NoticeBook applies them at start, so inside the pipeline's
    # batch the tables exist already); a Store applies them when opened.
    migrations.apply(conn)


def _canonical_id(conn: sqlite3.Connection, notice_id: str) -> str:
    """The stored spelling of an id people type ("dov-2026-0007"); UnknownNotice if none."""
    row = conn.execute("SELECT id FROM notices WHERE id = ?", (notice_id,)).fetchone()
    if row is None:  # ids are few: a case-blind scan is cheap
        row = conn.execute(
            "SELECT id FROM notices WHERE id = ? COLLATE NOCASE", (notice_id.strip(),)
        ).fetchone()
    if row is None:
        raise UnknownNotice(f"no notice {notice_id!r}")
    return str(row[0])


def get_notice(conn: sqlite3.Connection, notice_id: str) -> Notice:
    """The notice with its current episodes; UnknownNotice if there is none."""
    _with_row_factory(conn)
    _ensure_schema(conn)
    row = conn.execute("SELECT * FROM notices WHERE id = ?", (_canonical_id(conn, notice_id),)).fetchone()
    return _row_to_notice(conn, row)


def list_notices(
    conn: sqlite3.Connection, site: str | None = None, status: str | None = None
) -> list[Notice]:
    _with_row_factory(conn)
    _ensure_schema(conn)
    query = "SELECT * FROM notices WHERE 1=1"
    params: list[Any] = []
    if site is not None:
        query += " AND site = ?"
        params.append(site)
    if status is not None:
        query += " AND status = ?"
        params.append(status)
    rows = conn.execute(query + " ORDER BY opened_us, id", params).fetchall()
    return [_row_to_notice(conn, r) for r in rows]


def notice_history(conn: sqlite3.Connection, notice_id: str) -> list[NoticeChange]:
    _with_row_factory(conn)
    _ensure_schema(conn)
    notice_id = _canonical_id(conn, notice_id)
    rows = conn.execute("SELECT * FROM notice_changes WHERE notice_id = ? ORDER BY seq", (notice_id,))
    return [_row_to_change(r) for r in rows]


def _row_to_change(r: Mapping[str, Any]) -> NoticeChange:
    return NoticeChange(
        r["notice_id"],
        r["seq"],
        r["change"],
        r["status"],
        r["actor"],
        r["note"],
        from_us(r["at_us"]),
        from_us(r["deadline_us"]),
        json.loads(r["data"]),
    )


def _with_row_factory(conn: sqlite3.Connection) -> None:
    if conn.row_factory is not sqlite3.Row:
        conn.row_factory = sqlite3.Row


# --------------------------------------------------------------------------- formatting helpers


def episode_window(facts: Mapping[str, Any], start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The one window a notice tells for an episode: from when the condition began to its end.

    A sustained-condition rule (light above 1 lux for more than 300 s) flags minutes only once
    the condition has lasted; its findings say when it began (``details.run_start``). The
    notice, its plot and its sentences all use this window, so "17:02-17:16 (14 minutes)"
    is never told beside "17:07-17:16 (9 minutes)".
    """
    try:
        return stored_time(str(facts["start"])), stored_time(str(facts["end"]))
    except (KeyError, ValueError):
        return start, end


def violation_alert_text(facts: Mapping[str, Any], notice_id: str, title: str = "") -> str:
    """A violation's alert: its episode as the notice tells it at that moment ('so far': the
    episode may still grow, and the notice then tells its final span and highest window)."""
    where = ", ".join(str(s) for s in facts.get("sensors", ())) or "the site"
    standard = f"{title or facts.get('standard')} ({facts.get('section')})"
    if float(facts.get("duration_s") or 0.0) <= 1.0:  # an instant (a blast): no span to grow
        when = f"at {local_moment(str(facts.get('start')), str(facts.get('timezone') or 'UTC'))}"
    else:
        when = f"{facts.get('span_text')} so far"
    text = f"{standard} violation at {where}: {when}"
    if facts.get("worst_text"):
        text += f"; highest {facts['worst_text']} over {facts.get('peak_span_text')}"
    return f"{text}; notice {notice_id}"


def facts_json(facts: EpisodeFacts, timezone: str, site: SiteConfig | None = None) -> dict[str, Any]:
    """An episode's facts as the notices store them and the API and portal serve them."""
    worst = measurement_json(facts.peak)
    return {
        "episode_id": facts.id,
        "section": facts.section,
        "standard": facts.standard,
        "sensors": list(facts.sensors),
        "sensor_locations": {
            s: info.location for s in facts.sensors if site and (info := site.sensor(s)) and info.location
        },
        # The one window (see episode_window): the flagged minutes, from when the condition began.
        "start": format_ts(facts.start),
        "end": format_ts(facts.end),
        "start_local": local_stamp(facts.start, timezone),
        "end_local": local_stamp(facts.end, timezone),
        "span_text": span_text(facts.start, facts.end, timezone),
        "flagged_start": format_ts(facts.flagged_start),
        "timezone": timezone,
        "duration_s": facts.duration_s,
        "findings": facts.windows,
        "worst": worst,
        "worst_text": measurement_text(worst),
        "peak_start": format_ts(facts.peak_start),
        "peak_end": format_ts(facts.peak_end),
        "peak_span_text": span_text(facts.peak_start, facts.peak_end, timezone),
        "peak_exempt_s": facts.peak_exempt_s,
        "measurements": [measurement_json(m) for m in facts.measurements],
        "summary": facts.summary,
        "refs": list(facts.refs),
        "considered": list(facts.considered),
        "exemptions": list(facts.exemptions),
        "completeness_mean": facts.completeness_mean,
        "completeness_min": facts.completeness_min,
        "weather_affected_s": facts.weather_affected_s,
    }


def _citation_section(profile: Profile) -> str:
    """The section under which a citation follows an uncorrected violation: the profile's
    ``[notice] consequence_section`` (Dovre 13.3.B), or "" where the profile names none."""
    return profile.notice.consequence_section


# --------------------------------------------------------------------------- the book


def _require_note(notice_id: str, note: str, why: str) -> None:
    """A closing or an escalation is the Town's finding: it goes on the record with its words."""
    if not note.strip():
        raise NoticeError(f"notice {notice_id}: {why}")


class NoticeBook:
    """Notices over the store's connection. Writes join the caller's transaction (``store.batch``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conn = store.conn
        _ensure_schema(self.conn)

    # ------------------------------------------------------------------ reads

    def get(self, notice_id: str) -> Notice:
        return get_notice(self.conn, notice_id)

    def find(self, site: str | None = None, status: str | None = None) -> list[Notice]:
        """The notices of a site and/or in a status (all when neither is given)."""
        return list_notices(self.conn, site, status)

    def history(self, notice_id: str) -> list[NoticeChange]:
        return notice_history(self.conn, notice_id)

    def active_for(self, site: str, standard: str) -> Notice | None:
        marks = ",".join("?" * len(ACTIVE_STATUSES))
        row = self.conn.execute(
            f"SELECT * FROM notices WHERE site = ? AND standard = ? AND status IN ({marks})"
            " ORDER BY opened_us DESC LIMIT 1",
            (site, standard, *ACTIVE_STATUSES),
        ).fetchone()
        return None if row is None else _row_to_notice(self.conn, row)

    # ------------------------------------------------------------------ findings -> notices

    def on_findings(
        self, site: SiteConfig, profile: Profile, findings: Sequence[Finding], now: datetime
    ) -> list[NoticeEvent]:
        """Feed newly stored findings (any kinds); returns the notice changes to alert and publish.

        The returned events are marked announced: the caller raises them in the same
        transaction. Call it inside ``store.batch()`` (it opens its own otherwise).
        """
        violations = [f for f in findings if f.kind is FindingKind.VIOLATION and f.site == site.id]
        events: list[NoticeEvent] = []
        with self.store.batch():
            working = self._load_working(site.id)
            if violations:
                gap = timedelta(seconds=profile.episode_gap_s)
                updated = update_episodes([w.episode for w in working.values()], violations, gap)
                given = {f.id: finding_to_json(f) for f in violations}
                kept_ids = {e.id for e in updated}
                for episode in updated:
                    events.extend(self._place_episode(site, profile, episode, working, given, now))
                for gone in set(working) - kept_ids:  # merged into another episode
                    self.conn.execute(
                        "DELETE FROM notice_open_episodes WHERE site = ? AND episode_id = ?", (site.id, gone)
                    )
            self.conn.execute(
                "DELETE FROM notice_open_episodes WHERE site = ? AND end_us < ?",
                (site.id, to_us(now - _WORKING_RETENTION)),
            )
        return events

    def on_retracted(self, site: str, finding_id: str) -> None:
        """A finding withdrawn (its minute re-judged): the open episode holding it, if any, is told
        from its findings as they are then, the next time it grows, not from its facts so far."""
        for w in self._load_working(site).values():
            if w.fold is not None and finding_id in w.episode.finding_ids:
                self.conn.execute(
                    "UPDATE notice_open_episodes SET data = ? WHERE site = ? AND episode_id = ?",
                    (canonical_text(_working_json(w.episode, None)), site, w.episode.id),
                )

    def episode_of(self, site: str, finding_id: str) -> tuple[str, Mapping[str, Any]] | None:
        """(notice id, the episode's facts as that notice tells them now) of the open episode a
        violation finding belongs to; None when no open episode holds it."""
        for w in self._load_working(site).values():
            if finding_id not in w.episode.finding_ids:
                continue
            row = self.conn.execute(
                "SELECT data FROM notice_episodes WHERE notice_id = ? AND episode_id = ?"
                " ORDER BY revision DESC LIMIT 1",
                (w.notice_id, w.episode.id),
            ).fetchone()
            return (w.notice_id, json.loads(row[0])) if row is not None else None
        return None

    def _load_working(self, site: str) -> dict[str, _Working]:
        rows = self.conn.execute(
            "SELECT episode_id, notice_id, data FROM notice_open_episodes WHERE site = ?", (site,)
        ).fetchall()
        working = {}
        for r in rows:
            data = json.loads(r["data"])
            working[r["episode_id"]] = _Working(_episode_from_json(data), r["notice_id"], data.get("fold"))
        return working

    def _findings_of(self, ids: Sequence[str], given: Mapping[str, Mapping[str, Any]]) -> list[Any]:
        found: dict[str, Any] = {}
        missing = [i for i in ids if i not in given]
        for chunk in range(0, len(missing), 500):
            for r in queries.current_findings(self.conn, ids=missing[chunk : chunk + 500]):
                found[r["id"]] = json.loads(r["data"])
        return [given[i] if i in given else found[i] for i in ids if i in given or i in found]

    def _told_so_far(
        self, episode: Episode, prior: _Working | None, given: Mapping[str, Mapping[str, Any]]
    ) -> EpisodeFold:
        """The episode's facts as a fold over its findings: the fold told last time with the new
        findings added when the episode only grew forward (each tick, a new minute: nothing
        read back, issue 31); else folded again from every finding of the episode as it is
        now (a revised finding, a merge, an episode extended backwards, one retracted)."""
        carried = prior.fold if prior is not None else None
        if not episode.replaces and (prior is None or carried is not None):
            told = set(prior.episode.finding_ids) if prior is not None else set()
            new_ids = [i for i in episode.finding_ids if i not in told]
            if all(i in given for i in new_ids) and not told & given.keys():
                fold = EpisodeFold() if carried is None else EpisodeFold.from_json(carried)
                new = [finding_from_json(given[i]) for i in new_ids]
                if fold.extends(new):
                    for finding in sorted(new, key=lambda f: (f.start, f.id)):
                        fold.add(finding)
                    return fold
        return EpisodeFold.of([finding_from_json(f) for f in self._findings_of(episode.finding_ids, given)])

    def _place_episode(
        self,
        site: SiteConfig,
        profile: Profile,
        episode: Episode,
        working: dict[str, _Working],
        given: Mapping[str, Mapping[str, Any]],
        now: datetime,
    ) -> list[NoticeEvent]:
        prior = working.get(episode.id)
        if prior is not None and not set(episode.finding_ids) & set(given):
            return []  # untouched by these findings (a re-judged minute's revision is one of them)
        fold = self._told_so_far(episode, prior, given)
        facts = facts_json(fold.facts(episode), site.timezone, site)
        events: list[NoticeEvent] = []
        inherited = sorted(
            (working[r] for r in episode.replaces if r in working), key=lambda w: w.episode.start
        )
        if prior is not None:
            notice_id = prior.notice_id
        elif inherited:
            notice_id = inherited[0].notice_id
            for old in inherited:
                self._record_episode(old.notice_id, old.episode, {"replaced_by": episode.id}, now, site.id)
        else:
            notice_id, event = self._new_episode(site, profile, episode, facts, now)
            events.append(event)
        self._record_episode(notice_id, episode, facts, now, site.id)
        self.conn.execute(
            "INSERT INTO notice_open_episodes (site, episode_id, notice_id, end_us, data) VALUES (?,?,?,?,?)"
            " ON CONFLICT(site, episode_id) DO UPDATE SET notice_id = excluded.notice_id,"
            " end_us = excluded.end_us, data = excluded.data",
            (
                site.id,
                episode.id,
                notice_id,
                to_us(episode.end),
                canonical_text(_working_json(episode, fold)),
            ),
        )
        return events

    def _new_episode(
        self, site: SiteConfig, profile: Profile, episode: Episode, facts: Mapping[str, Any], now: datetime
    ) -> tuple[str, NoticeEvent]:
        active = self.active_for(site.id, episode.standard)
        decision = decide(active, episode, profile, now, ZoneInfo(site.timezone))
        if active is None or decision.action is Action.OPEN:
            return self._open(site, profile, episode, facts, now, decision.deadline)
        where = ", ".join(episode.sensors)
        when = facts["start_local"]
        if decision.action is Action.ESCALATE:
            citation = _citation_section(profile)
            cite = f" ({citation_text(citation)})" if citation else ""
            pending = " An extension request was pending." if decision.extension_pending else ""
            note = (
                f"New violation of {citation_text(active.section)} at {where} from {when}, after the cure"
                f" deadline {local_stamp(active.deadline, site.timezone)}; the violation was not corrected. "
                f"Citation recommended{cite}.{pending}"
            )
            seq = self._change(
                active,
                "escalated",
                ESCALATED,
                AUTO_ACTOR,
                note,
                now,
                active.deadline,
                {"episode_id": episode.id, "citation_section": citation},
                announced=True,
            )
            message = f"Citation recommended{cite} on notice {active.id} ({site.name}): {note}"
            return active.id, self._event(
                active,
                "escalated",
                ESCALATED,
                seq,
                message,
                now,
                facts,
                note,
            )
        note = (
            f"Continuing violation of {citation_text(active.section)} at {where} from {when}:"
            f" {facts['summary']}"
        )
        seq = self._change(
            active,
            "continuing",
            active.status,
            AUTO_ACTOR,
            note,
            now,
            active.deadline,
            {"episode_id": episode.id},
            announced=True,
        )
        message = f"Continuing violation attached to notice {active.id} ({site.name}): {facts['summary']}"
        return active.id, self._event(
            active,
            "continuing",
            active.status,
            seq,
            message,
            now,
            facts,
            note,
        )

    def _open(
        self,
        site: SiteConfig,
        profile: Profile,
        episode: Episode,
        facts: Mapping[str, Any],
        now: datetime,
        deadline: datetime,
    ) -> tuple[str, NoticeEvent]:
        """Issue a notice for ``episode`` with its cure ``deadline`` (``rules.notice_decision``)."""
        tz = ZoneInfo(site.timezone)
        year = now.astimezone(tz).year
        prefix = profile.notice_prefix
        row = self.conn.execute(
            "INSERT INTO notice_counters (prefix, year, last) VALUES (?, ?, 1)"
            " ON CONFLICT(prefix, year) DO UPDATE SET last = last + 1 RETURNING last",
            (prefix, year),
        ).fetchone()
        notice_id = f"{prefix}-{year}-{int(row[0]):04d}"
        standard = profile.standards.get(episode.standard)
        data = {
            "town": profile.authority,
            "profile": profile.name,
            "profile_title": profile.title,
            "profile_version": self.store.profile_version(site.id),  # short SHA-256 of the chained profile
            "site": site.id,
            "site_name": site.name,
            "operator": site.operator,
            "timezone": site.timezone,
            "standard": episode.standard,
            "rule": standard.rule if standard else "",
            "section": standard.section if standard else episode.section,
            "title": standard.title if standard else "",
            "summary": standard.summary if standard else "",
            "text": standard.text if standard else "",
            "required_action": standard.required_action if standard else "",
            "cure_days": profile.cure_days,
            "cure_section": profile.cure_section,
            # How the deadline was counted, for the notice to state (the Town confirms the reading).
            "deadline_rule": _deadline_rule(profile),
            "cure_next_business_day": profile.cure_next_business_day,
            "cure_closed_days": list(profile.cure_closed_days),
            "holidays": list(profile.holidays),
            "citation_section": _citation_section(profile),
            "issued": format_ts(now),
            "issued_local": local_stamp(now, site.timezone),
            "deadline": format_ts(deadline),
            "deadline_local": local_stamp(deadline, site.timezone),
        }
        row_values = {
            "id": notice_id,
            "site": site.id,
            "standard": episode.standard,
            "section": data["section"],
            "opened_us": to_us(now),
            "first_deadline_us": to_us(deadline),
            "data": canonical_text(data),
        }
        self.conn.execute(
            "INSERT INTO notices (id, site, standard, section, opened_us, first_deadline_us, data, status,"
            " deadline_us, updated_us) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (*row_values.values(), OPEN, to_us(deadline), to_us(now)),
        )
        self.store.chain_row(site.id, "notice", row_values, now)
        notice = Notice(
            notice_id, site.id, episode.standard, str(data["section"]), OPEN, now, deadline, deadline, data
        )
        cure = f"{citation_text(profile.cure_section)}, " if profile.cure_section else ""
        cited = citation_text(notice.section)
        note = (
            f"Notice of violation issued for {cited} ({data['title']}); correct by "
            f"{data['deadline_local']} ({cure}{profile.cure_days} days)"
        )
        seq = self._change(
            notice,
            "opened",
            OPEN,
            AUTO_ACTOR,
            note,
            now,
            deadline,
            {"episode_id": episode.id},
            announced=True,
        )
        operator = f" to {site.operator}" if site.operator else ""
        message = (
            f"Notice of violation {notice_id} issued{operator} for {site.name}: {data['title']} "
            f"({cited}). {facts['summary']}. Correct by {data['deadline_local']}."
        )
        return notice_id, self._event(
            notice,
            "opened",
            OPEN,
            seq,
            message,
            now,
            facts,
            note,
        )

    def _record_episode(
        self, notice_id: str, episode: Episode, facts: Mapping[str, Any], now: datetime, site: str
    ) -> None:
        row = self.conn.execute(
            "SELECT MAX(revision) FROM notice_episodes WHERE notice_id = ? AND episode_id = ?",
            (notice_id, episode.id),
        ).fetchone()
        values = {
            "notice_id": notice_id,
            "episode_id": episode.id,
            "revision": (row[0] or 0) + 1,
            "start_us": to_us(episode.start),
            "end_us": to_us(episode.end),
            "finding_ids": canonical_text(list(episode.finding_ids)),
            "data": canonical_text(facts),
        }
        self.conn.execute(
            "INSERT INTO notice_episodes (notice_id, episode_id, revision, start_us, end_us, finding_ids,"
            " data, recorded_us) VALUES (?,?,?,?,?,?,?,?)",
            (*values.values(), to_us(now)),
        )
        self.store.chain_row(site, "notice_episode", values, now)

    # ------------------------------------------------------------------ the procedure

    def request_extension(
        self,
        notice_id: str,
        explanation: str,
        actor: str,
        now: datetime,
        *,
        requested_days: int | None = None,
    ) -> NoticeEvent:
        """13.3.A: the operator's written explanation of the need for more time, and how much
        (``requested_days``, recorded with the request when given)."""
        if not explanation.strip():
            raise NoticeError("an extension request needs the operator's written explanation")
        if requested_days is not None and (problem := extra_days_problem(requested_days)):
            raise NoticeError(f"the days requested: {problem}")
        with self.store.batch():
            notice = self._for_change(notice_id, EXTENSION_REQUESTED, now)
            note = explanation.strip()
            data = {} if requested_days is None else {"requested_days": requested_days}
            seq = self._change(
                notice, "extension_requested", EXTENSION_REQUESTED, actor, note, now, notice.deadline, data
            )
            if requested_days is None:
                asked = "more time"
            else:
                asked = f"{requested_days} more day{'s' if requested_days != 1 else ''}"
            message = (
                f"{actor} requests {asked} to correct notice {notice.id} (deadline "
                f"{local_stamp(notice.deadline, notice.timezone)}): {note}"
            )
            return self._event(
                notice,
                "extension_requested",
                EXTENSION_REQUESTED,
                seq,
                message,
                now,
                None,
                note,
                actor,
            )

    def extend(
        self,
        notice_id: str,
        new_deadline: datetime | None,
        actor: str,
        note: str,
        now: datetime,
        *,
        extra_days: int | None = None,
    ) -> NoticeEvent:
        """13.3.A: the Town grants more time, as a new deadline or as ``extra_days`` more days
        (to the end of the local day that many days after the current deadline's day)."""
        if (new_deadline is None) == (extra_days is None):
            raise NoticeError("an extension needs either a new deadline or a number of extra days")
        with self.store.batch():
            notice = self._for_change(notice_id, EXTENDED, now)
            if extra_days is not None:
                try:
                    new_deadline = extended_deadline(
                        notice.deadline, extra_days, ZoneInfo(notice.timezone), _roll_calendar(notice)
                    )
                except ValueError as exc:
                    raise NoticeError(str(exc)) from None
            assert new_deadline is not None
            if new_deadline <= notice.deadline:
                raise InvalidTransition(
                    f"notice {notice.id}: the new deadline {local_stamp(new_deadline, notice.timezone)} "
                    f"is not after the current one {local_stamp(notice.deadline, notice.timezone)}"
                )
            new_deadline = new_deadline.astimezone(UTC)
            extra = new_deadline - notice.deadline
            tz = ZoneInfo(notice.timezone)
            extra_local_days = (
                new_deadline.astimezone(tz).date() - notice.deadline.astimezone(tz).date()
            ).days
            if extra_days is None and extra_local_days > MAX_EXTRA_DAYS:  # a date given: the same bound
                raise NoticeError(
                    f"notice {notice.id}: the new deadline {local_stamp(new_deadline, notice.timezone)} is "
                    f"{extra_local_days} days after the current one; an extension grants at most "
                    f"{MAX_EXTRA_DAYS} days"
                )
            seq = self._change(
                notice,
                "extended",
                EXTENDED,
                actor,
                note,
                now,
                new_deadline,
                {
                    "previous_deadline": format_ts(notice.deadline),
                    "new_deadline": format_ts(new_deadline),
                    "extra_time_s": round(extra.total_seconds(), 6),
                    "extra_days": extra_local_days,
                },
            )
            granted = f"{extra_local_days} more day{'s' if extra_local_days != 1 else ''}"
            message = (
                f"Notice {notice.id}: the Town extended the cure deadline to "
                f"{local_stamp(new_deadline, notice.timezone)} ({granted} after "
                f"{local_stamp(notice.deadline, notice.timezone)}). {note}".strip()
            )
            return self._event(
                notice,
                "extended",
                EXTENDED,
                seq,
                message,
                now,
                None,
                note,
                actor,
                deadline=new_deadline,
            )

    def serve(
        self,
        notice_id: str,
        served: datetime,
        actor: str,
        note: str,
        now: datetime,
        *,
        served_day: date | None = None,
    ) -> NoticeEvent:
        """13.3.A grants the Operator its days from the notice's issue by the Town: minewatch draws
        a notice up when it finds the violation, and the Town serves it, perhaps later. Serving it
        records when, and counts the cure period again from then (the same rule as at issue:
        to the end of the local day ``cure_days`` after, rolled as the notice says); a deadline
        already later (an extension) stays. Once per notice, while it is in the cure procedure.

        ``served_day``: the service was given as a day, not a time (``served`` is then the moment
        the period counts from: that day's start, or the issue on the issue's own day); the
        record keeps the day, and every surface says the day alone (:func:`service_text`)."""
        with self.store.batch():
            notice = self.get(notice_id)
            tz = ZoneInfo(notice.timezone)
            if notice.status not in CURE_STATUSES:
                raise InvalidTransition(
                    f"notice {notice.id} is {notice.status.replace('_', ' ')}; 'served' is possible only"
                    " while it is open, extension requested or extended"
                )
            earlier = [c for c in self.history(notice.id) if c.change == "served"]
            if earlier:
                when = service_text(earlier[0].data, notice.timezone)
                raise InvalidTransition(f"notice {notice.id} was served already, {when}")
            if served < notice.opened:
                raise InvalidTransition(
                    f"notice {notice.id} was issued {local_stamp(notice.opened, notice.timezone)}; it cannot"
                    f" have been served {local_stamp(served, notice.timezone)}, before that"
                )
            if served > now:
                raise InvalidTransition(
                    f"notice {notice.id}: {local_stamp(served, notice.timezone)} is still to come;"
                    " record the service once it is made"
                )
            days = int(notice.data.get("cure_days", 0))
            counted = cure_deadline(served, days, tz, _roll_calendar(notice))
            deadline = max(counted, notice.deadline)
            record = {
                "served": format_ts(served),
                "previous_deadline": format_ts(notice.deadline),
                "counted_deadline": format_ts(counted),
            }
            if served_day is not None:
                record["served_day"] = served_day.isoformat()
            seq = self._change(notice, "served", notice.status, actor, note, now, deadline, record)
            now_due = local_stamp(deadline, notice.timezone)
            told = f"the cure deadline is now {now_due} ({days} days after service)"
            if deadline != counted:
                told = f"the cure deadline stays {now_due}, later than {days} days after service"
            message = (
                f"Notice {notice.id} was served on the Operator {service_text(record, notice.timezone)} "
                f"by {actor}; {told}. {note}".strip()
            )
            return self._event(
                notice,
                "served",
                notice.status,
                seq,
                message,
                now,
                None,
                note,
                actor,
                deadline=deadline,
            )

    def close(self, notice_id: str, note: str, actor: str, now: datetime) -> NoticeEvent:
        """The town finds the violation corrected."""
        _require_note(notice_id, note, "closing it needs the Town's note: what was found corrected")
        with self.store.batch():
            notice = self._for_change(notice_id, CORRECTED, now)
            seq = self._change(notice, "corrected", CORRECTED, actor, note, now, notice.deadline, {})
            message = f"Notice {notice.id} closed by the Town as corrected. {note}".strip()
            return self._event(
                notice,
                "corrected",
                CORRECTED,
                seq,
                message,
                now,
                None,
                note,
                actor,
            )

    def escalate(
        self,
        notice_id: str,
        note: str,
        actor: str,
        now: datetime,
        *,
        before_deadline_reason: str | None = None,
    ) -> NoticeEvent:
        """13.3.B after the cure deadline; before it only with an explicit reason, recorded."""
        _require_note(notice_id, note, "escalating it needs the Town's note: why a citation follows")
        with self.store.batch():
            notice = self._for_change(notice_id, ESCALATED, now)
            early = not after_deadline(now, notice.deadline)
            reason = (before_deadline_reason or "").strip()
            if early and not reason:
                citation = str(notice.data.get("citation_section") or "")
                cited = f" ({citation_text(citation)})" if citation else ""
                raise EarlyEscalation(
                    f"notice {notice.id}: its cure deadline {local_stamp(notice.deadline, notice.timezone)} "
                    f"has not passed, and a citation{cited} follows a failure to correct"
                )
            data: dict[str, Any] = {"citation_section": str(notice.data.get("citation_section", ""))}
            if early:
                data.update({"before_deadline": True, "override_reason": reason})
                note = f"{note} (before the cure deadline: {reason})".strip()
            citation = str(data["citation_section"])
            seq = self._change(
                notice,
                "escalated",
                ESCALATED,
                actor,
                note,
                now,
                notice.deadline,
                data,
            )
            cite = f" ({citation_text(citation)})" if citation else ""
            message = f"Citation recommended{cite} on notice {notice.id}: {note}".strip()
            return self._event(
                notice,
                "escalated",
                ESCALATED,
                seq,
                message,
                now,
                None,
                note,
                actor,
            )

    def take_announcements(self, now: datetime, sites: Collection[str] | None = None) -> list[NoticeEvent]:
        """Changes not yet announced (made by the CLI in another process); marks them announced.

        The pipeline calls this on its tick, inside its batch, and raises each as an alert.
        ``sites``: only the notices of these sites (a daemon worker announces its own sites').
        """
        events: list[NoticeEvent] = []
        with self.store.batch():
            rows = self.conn.execute(
                "SELECT * FROM notice_changes WHERE announced = 0 ORDER BY at_us, notice_id, seq"
            ).fetchall()
            if sites is not None:
                owned = set(sites)
                site_of = dict(self.conn.execute("SELECT id, site FROM notices").fetchall())
                rows = [r for r in rows if site_of.get(r["notice_id"]) in owned]
            for r in rows:
                change = _row_to_change(r)
                notice = self.get(change.notice_id)
                events.append(_event_for_change(notice, change, now))
                self.conn.execute(
                    "UPDATE notice_changes SET announced = 1 WHERE notice_id = ? AND seq = ?",
                    (change.notice_id, change.seq),
                )
        return events

    def remind(self, site: SiteConfig, profile: Profile, now: datetime) -> list[NoticeEvent]:
        """The cure-deadline reminders owed at ``now`` for the site's notices nobody has closed
        (rules.notice_decision.reminder_due): the operator's warning that a deadline is near, and
        the Town's that one has passed with the notice still open. Each is said once per deadline
        and recorded as a chained change (the status stays): the record shows who was told what
        and when. Announced by the caller, as the daemon's own changes are."""
        rows = self.conn.execute(
            "SELECT id, status, deadline_us, coalesce(json_extract(data, '$.timezone'), 'UTC') FROM notices"
            f" WHERE site = ? AND status IN ({','.join('?' * len(CURE_STATUSES))}) ORDER BY opened_us, id",
            (site.id, *CURE_STATUSES),
        ).fetchall()
        events: list[NoticeEvent] = []
        for notice_id, status, deadline_us, timezone in rows:
            told = {
                (change, from_us(told_us))
                for change, told_us in self.conn.execute(
                    "SELECT change, deadline_us FROM notice_changes WHERE notice_id = ? AND change IN (?, ?)",
                    (notice_id, Reminder.DEADLINE_NEAR.value, Reminder.DEADLINE_PASSED.value),
                )
            }
            deadline = from_us(deadline_us)
            due = reminder_due(status, deadline, told, profile.cure_remind_days, now, ZoneInfo(timezone))
            if due is None:
                continue
            with self.store.batch():
                notice = self.get(notice_id)
                message = _reminder_text(notice, due, profile, now)
                data = {"reminder": due.value, "deadline": format_ts(notice.deadline)}
                seq = self._change(
                    notice, due.value, status, AUTO_ACTOR, message, now, notice.deadline, data, announced=True
                )
            events.append(self._event(notice, due.value, status, seq, message, now, None, message))
        return events

    # ------------------------------------------------------------------ internals

    def _for_change(self, notice_id: str, target: str, now: datetime) -> Notice:
        notice = self.get(notice_id)
        if now < notice.opened:
            raise InvalidTransition(
                f"notice {notice.id} was issued {local_stamp(notice.opened, notice.timezone)}; a change "
                f"cannot be dated {local_stamp(now, notice.timezone)}, before it (check this machine's clock)"
            )
        if notice.status not in _ALLOWED_FROM[target]:
            allowed = ", ".join(_ALLOWED_FROM[target])
            raise InvalidTransition(
                f"notice {notice.id} is {notice.status.replace('_', ' ')}; "
                f"'{target.replace('_', ' ')}' is possible only when it is {allowed}"
            )
        return notice

    def _change(
        self,
        notice: Notice,
        change: str,
        status: str,
        actor: str,
        note: str,
        now: datetime,
        deadline: datetime,
        data: Mapping[str, Any],
        *,
        announced: bool = False,
    ) -> int:
        if not actor.strip():
            raise NoticeError("every change needs who made it (actor)")
        row = self.conn.execute(
            "SELECT MAX(seq) FROM notice_changes WHERE notice_id = ?", (notice.id,)
        ).fetchone()
        values = {
            "notice_id": notice.id,
            "seq": (row[0] or 0) + 1,
            "change": change,
            "status": status,
            "actor": actor,
            "note": note,
            "at_us": to_us(now),
            "deadline_us": to_us(deadline),
            "data": canonical_text(dict(data)),
        }
        self.conn.execute(
            "INSERT INTO notice_changes (notice_id, seq, change, status, actor, note, at_us, deadline_us,"
            " data, announced) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (*values.values(), int(announced)),
        )
        self.conn.execute(
            "UPDATE notices SET status = ?, deadline_us = ?, updated_us = ? WHERE id = ?",
            (status, to_us(deadline), to_us(now), notice.id),
        )
        self.store.chain_row(notice.site, "notice_change", values, now)
        return int(values["seq"])

    def _event(
        self,
        notice: Notice,
        change: str,
        status: str,
        seq: int,
        message: str,
        now: datetime,
        facts: Mapping[str, Any] | None,
        note: str,
        actor: str = AUTO_ACTOR,
        deadline: datetime | None = None,
    ) -> NoticeEvent:
        """The change's event; whom it alerts, as what, from _CHANGE_ALERTS (one table for the
        book's own changes and those the daemon announces for the CLI)."""
        audiences, kind, severity = _alert_of(change)
        return _make_event(
            notice,
            change,
            status,
            seq,
            audiences,
            kind,
            severity,
            message,
            now,
            facts,
            note,
            actor,
            deadline or notice.deadline,
        )


def service_text(record: Mapping[str, Any], timezone: str) -> str:
    """When a served change says the notice was served, as every surface says it: the day alone
    ('2026-12-07') where the Town gave a day (no one gave a time), else the local time."""
    if record.get("served_day"):
        return str(record["served_day"])
    return local_stamp(parse_ts(record["served"], "served"), timezone)


def _deadline_rule(profile: Profile) -> str:
    rule = f"the end of the site's local day {profile.cure_days} days after the day of issue"
    if profile.cure_next_business_day:
        closed = ", ".join(d.capitalize() for d in profile.cure_closed_days)
        source = profile.cure_next_business_day_source
        rule += f", moved to the next business day when that day is a {closed} or legal holiday"
        rule += f" ({source})" if source else ""
    return rule


def _roll_calendar(notice: Notice) -> WorkCalendar | None:
    """The calendar the notice's deadlines roll forward on, as recorded when it was issued."""
    if not notice.data.get("cure_next_business_day"):
        return None
    return WorkCalendar.of(notice.data.get("cure_closed_days", ["sunday"]), notice.data.get("holidays", []))


_CHANGE_ALERTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "opened": (("town", "operator"), "notice_opened", "violation"),
    "continuing": (("town", "operator"), "notice_continuing", "violation"),
    "escalated": (("town",), "citation_recommended", "citation"),
    "extension_requested": (("town",), "notice_extension_requested", "info"),
    "extended": (("operator", "town"), "notice_extended", "info"),
    "corrected": (("operator", "town"), "notice_corrected", "info"),
    "served": (("operator", "town"), "notice_served", "info"),
    # Reminders (NoticeBook.remind): the operator acts before the deadline, the Town after it.
    Reminder.DEADLINE_NEAR.value: (("operator",), "notice_deadline_near", "warning"),
    Reminder.DEADLINE_PASSED.value: (("town", "operator"), "notice_deadline_passed", "warning"),
}


def _alert_of(change: str) -> tuple[tuple[str, ...], str, str]:
    """Whom a notice change alerts, its alert kind and severity (a change not in the table: the
    Town, as information)."""
    return _CHANGE_ALERTS.get(change, (("town",), f"notice_{change}", "info"))


def _reminder_text(notice: Notice, reminder: Reminder, profile: Profile, now: datetime) -> str:
    """What a reminder says: the deadline as every surface shows it, and what may be done."""
    title = notice.data.get("title", "") or notice.standard
    deadline = local_stamp(notice.deadline, notice.timezone)
    cure = f" ({citation_text(profile.cure_section)})" if profile.cure_section else ""
    if reminder is Reminder.DEADLINE_PASSED:
        state = notice.status.replace("_", " ")
        return (
            f"Notice {notice.id} ({title}): the cure deadline {deadline} has passed and the notice is "
            f"still {state}. The Town decides whether the violation was corrected (close the notice), "
            f"more time is due (extend it) or a citation follows (escalate it)."
        )
    when = deadline_words(notice.deadline, now, ZoneInfo(notice.timezone))
    # More time is asked for as the profile's ordinance says (its [notice] more_time): a profile
    # that states no procedure is not given one here.
    ask = f", or ask the Town for more time{cure}" if profile.notice.more_time else ""
    return (
        f"Notice {notice.id} ({title}): the cure deadline is {deadline}, {when}. Correct the violation"
        f" before then{ask}."
    )


def _event_for_change(notice: Notice, change: NoticeChange, now: datetime) -> NoticeEvent:
    audiences, kind, severity = _alert_of(change.change)
    by = f" ({change.actor})" if change.actor != AUTO_ACTOR else ""
    message = f"Notice {notice.id}: {change.change.replace('_', ' ')}{by}. {change.note}".strip()
    return _make_event(
        notice,
        change.change,
        change.status,
        change.seq,
        audiences,
        kind,
        severity,
        message,
        now,
        None,
        change.note,
        change.actor,
        change.deadline,
    )


def _make_event(
    notice: Notice,
    change: str,
    status: str,
    seq: int,
    audiences: tuple[str, ...],
    kind: str,
    severity: str,
    message: str,
    now: datetime,
    facts: Mapping[str, Any] | None,
    note: str,
    actor: str,
    deadline: datetime,
) -> NoticeEvent:
    payload: dict[str, Any] = {
        "notice_id": notice.id,
        "site": notice.site,
        "change": change,
        "seq": seq,
        "status": status,
        "standard": notice.standard,
        "section": notice.section,
        "title": notice.data.get("title", ""),
        "operator": notice.data.get("operator", ""),
        "opened": format_ts(notice.opened),
        "deadline": format_ts(deadline),
        "deadline_local": local_stamp(deadline, notice.timezone),
        "actor": actor,
        "note": note,
        "ts": format_ts(now),
        "message": message,
    }
    if facts is not None:
        payload["episode"] = dict(facts)
    return NoticeEvent(notice.id, notice.site, change, seq, audiences, kind, severity, message, payload)


def _episode_to_json(episode: Episode) -> dict[str, Any]:
    return {
        "site": episode.site,
        "standard": episode.standard,
        "section": episode.section,
        "sensors": list(episode.sensors),
        "start_us": to_us(episode.start),
        "end_us": to_us(episode.end),
        "finding_ids": list(episode.finding_ids),
        "worst": measurement_json(episode.worst),
        "kind": episode.kind.value,
    }


def _working_json(episode: Episode, fold: EpisodeFold | None) -> dict[str, Any]:
    """A row of the working set: the episode, and its facts so far (None: fold them again)."""
    return {**_episode_to_json(episode), "fold": None if fold is None else fold.to_json()}


def _episode_from_json(d: Mapping[str, Any]) -> Episode:
    w = d.get("worst")
    worst = None if w is None else Measurement.from_json(w)
    return Episode(
        site=d["site"],
        standard=d["standard"],
        section=d["section"],
        sensors=tuple(d["sensors"]),
        start=from_us(d["start_us"]),
        end=from_us(d["end_us"]),
        finding_ids=tuple(sorted(d["finding_ids"])),  # as merging keeps them
        worst=worst,
        kind=FindingKind(d["kind"]),
    )
