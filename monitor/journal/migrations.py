"""Every table of the store, created and changed through ONE ordered list of named migrations.

Each module's tables (the journal and chain, alerts, notices, deliveries, the InfluxDB outbox)
are a migration here, applied once each when the store is opened (``Store.__init__``) and
recorded in the ``migrations`` table with when they ran (pattern: sqlite-utils'
``sqlite_utils/migrations.py``). A change to a table is a NEW migration appended to the list,
never an edit of an applied one. The first steps are written with ``IF NOT EXISTS``: stores
made before this registry (PRAGMA user_version 2, with or without the conflicts table and the
later meta keys) already hold some of the tables, and record the migrations as applied.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TABLE = "migrations"
# PRAGMA user_version of the layout; an older store is migrated when opened (Store).
SCHEMA_VERSION = 2

STORE = """
-- Time before sensor in the key: a second of every sensor's readings lands on a few
-- adjacent pages instead of one page per sensor (the write volume of a commit follows
-- the pages it touches), and time-window reads need no second index.
-- chain_seq: the row's chain entry, found without a key index (see chain_lookup).
CREATE TABLE IF NOT EXISTS sound (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, duration_s REAL NOT NULL,
    LAeq REAL NOT NULL, LAFmax REAL NOT NULL, LASmax REAL, LAFmin REAL, LCeq REAL,
    LCpeak REAL NOT NULL, LZpeak REAL, LZeq REAL,
    source TEXT NOT NULL, late INTEGER NOT NULL, received_us INTEGER NOT NULL, chain_seq INTEGER,
    PRIMARY KEY (site, ts_us, sensor)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS readings (
    site TEXT NOT NULL, sensor TEXT NOT NULL, kind TEXT NOT NULL, ts_us INTEGER NOT NULL,
    duration_s REAL NOT NULL, data TEXT NOT NULL, late INTEGER NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, sensor, kind, ts_us)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audio (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, seq INTEGER NOT NULL,
    sample_rate INTEGER NOT NULL, format TEXT NOT NULL, pcm BLOB NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, sensor, ts_us)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    site TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, ts_us INTEGER NOT NULL, end_us INTEGER,
    data TEXT NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, kind, id)
);
CREATE INDEX IF NOT EXISTS events_time ON events (site, ts_us);
CREATE TABLE IF NOT EXISTS findings (
    id TEXT NOT NULL, revision INTEGER NOT NULL, site TEXT NOT NULL, standard TEXT NOT NULL,
    section TEXT NOT NULL, kind TEXT NOT NULL, start_us INTEGER NOT NULL, end_us INTEGER NOT NULL,
    retracted INTEGER NOT NULL, data TEXT NOT NULL, created_us INTEGER NOT NULL,
    PRIMARY KEY (id, revision)
);
CREATE INDEX IF NOT EXISTS findings_time ON findings (site, start_us);
CREATE TABLE IF NOT EXISTS alerts (
    id TEXT PRIMARY KEY, site TEXT NOT NULL, audience TEXT NOT NULL, kind TEXT NOT NULL,
    severity TEXT NOT NULL, condition TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL,
    created_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS alerts_time ON alerts (site, created_us);
CREATE TABLE IF NOT EXISTS rejections (
    id INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT NOT NULL, topic TEXT NOT NULL, reason TEXT NOT NULL,
    excerpt TEXT NOT NULL, received_us INTEGER NOT NULL
);
-- A reading resent with other content than the one kept (the first): both digests, one row
-- per distinct second version. Added without a layout version: CREATE IF NOT EXISTS suffices.
CREATE TABLE IF NOT EXISTS conflicts (
    site TEXT NOT NULL, sensor TEXT NOT NULL, kind TEXT NOT NULL, ts_us INTEGER NOT NULL,
    first_digest TEXT NOT NULL, second_digest TEXT NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, sensor, kind, ts_us, second_digest)
);
CREATE TABLE IF NOT EXISTS health (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, state TEXT NOT NULL,
    gap_s REAL, detail TEXT NOT NULL DEFAULT '', PRIMARY KEY (site, sensor, ts_us, state)
);
CREATE TABLE IF NOT EXISTS calibration (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, reference_db REAL NOT NULL,
    measured_db REAL NOT NULL, drift_db REAL, flagged INTEGER NOT NULL, PRIMARY KEY (site, sensor, ts_us)
);
CREATE TABLE IF NOT EXISTS progress (
    site TEXT PRIMARY KEY, evaluated_until_us INTEGER NOT NULL, final_until_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chain (
    site TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
    digest TEXT NOT NULL, head TEXT NOT NULL, recorded_us INTEGER NOT NULL,
    PRIMARY KEY (site, seq)
) WITHOUT ROWID;
-- Chain entry by record key, for every kind but sound: one sound entry per sensor per
-- second would make this the costliest insert of all, and sound rows carry chain_seq.
-- A query must state the condition itself for SQLite to use a partial index (KEYED).
CREATE INDEX IF NOT EXISTS chain_lookup ON chain (site, kind, key) WHERE kind <> 'sound';
CREATE TABLE IF NOT EXISTS anchors (
    site TEXT NOT NULL, seq INTEGER NOT NULL, head TEXT NOT NULL, published_us INTEGER NOT NULL,
    PRIMARY KEY (site, seq)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


# Version 0/1 -> 2: sound keyed by time first and carrying its chain entry's seq; the chain
# key index without sound entries. The old chain_key index finds each row's entry. The table
# is spelled out as of version 2 on purpose, not taken from STORE: a migration must keep
# producing its version's layout when STORE moves on (a later version adds its own step).
LAYOUT_2 = """
CREATE TABLE sound_v2 (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, duration_s REAL NOT NULL,
    LAeq REAL NOT NULL, LAFmax REAL NOT NULL, LASmax REAL, LAFmin REAL, LCeq REAL,
    LCpeak REAL NOT NULL, LZpeak REAL, LZeq REAL,
    source TEXT NOT NULL, late INTEGER NOT NULL, received_us INTEGER NOT NULL, chain_seq INTEGER,
    PRIMARY KEY (site, ts_us, sensor)
) WITHOUT ROWID;
INSERT INTO sound_v2 SELECT s.site, s.sensor, s.ts_us, s.duration_s, s.LAeq, s.LAFmax, s.LASmax,
    s.LAFmin, s.LCeq, s.LCpeak, s.LZpeak, s.LZeq, s.source, s.late, s.received_us,
    (SELECT c.seq FROM chain c
     WHERE c.site = s.site AND c.kind = 'sound' AND c.key = s.sensor || '|' || s.ts_us)
    FROM sound s;
DROP TABLE sound;
ALTER TABLE sound_v2 RENAME TO sound;
DROP INDEX IF EXISTS chain_key;
"""


ALERTS = """
CREATE TABLE IF NOT EXISTS alert_conditions (
    site TEXT NOT NULL, condition TEXT NOT NULL, last_us INTEGER NOT NULL, PRIMARY KEY (site, condition)
);
"""


NOTICES = """
CREATE TABLE IF NOT EXISTS notices (
    id TEXT PRIMARY KEY, site TEXT NOT NULL, standard TEXT NOT NULL, section TEXT NOT NULL,
    opened_us INTEGER NOT NULL, first_deadline_us INTEGER NOT NULL, data TEXT NOT NULL,
    status TEXT NOT NULL, deadline_us INTEGER NOT NULL, updated_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS notices_open ON notices (site, standard, status);
CREATE TABLE IF NOT EXISTS notice_changes (
    notice_id TEXT NOT NULL REFERENCES notices(id), seq INTEGER NOT NULL, change TEXT NOT NULL,
    status TEXT NOT NULL, actor TEXT NOT NULL, note TEXT NOT NULL, at_us INTEGER NOT NULL,
    deadline_us INTEGER NOT NULL, data TEXT NOT NULL, announced INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (notice_id, seq)
);
CREATE INDEX IF NOT EXISTS notice_changes_unannounced ON notice_changes (announced);
CREATE TABLE IF NOT EXISTS notice_episodes (
    notice_id TEXT NOT NULL REFERENCES notices(id), episode_id TEXT NOT NULL, revision INTEGER NOT NULL,
    start_us INTEGER NOT NULL, end_us INTEGER NOT NULL, finding_ids TEXT NOT NULL, data TEXT NOT NULL,
    recorded_us INTEGER NOT NULL, PRIMARY KEY (notice_id, episode_id, revision)
);
CREATE TABLE IF NOT EXISTS notice_open_episodes (
    site TEXT NOT NULL, episode_id TEXT NOT NULL, notice_id TEXT NOT NULL, end_us INTEGER NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (site, episode_id)
);
CREATE TABLE IF NOT EXISTS notice_counters (
    prefix TEXT NOT NULL, year INTEGER NOT NULL, last INTEGER NOT NULL, PRIMARY KEY (prefix, year)
);
"""


DELIVERIES = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, alert_id TEXT NOT NULL, site TEXT NOT NULL, recipient TEXT NOT NULL,
    channel INTEGER NOT NULL, channel_type TEXT NOT NULL, target TEXT NOT NULL, alert TEXT NOT NULL,
    status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_us INTEGER NOT NULL,
    last_error TEXT NOT NULL DEFAULT '', created_us INTEGER NOT NULL, done_us INTEGER,
    reported INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_us);
"""


# What a person did through the web portal (monitor/portal): who, what, when, from where.
PORTAL_ACTIONS = """
CREATE TABLE IF NOT EXISTS portal_actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT NOT NULL, ts_us INTEGER NOT NULL, actor TEXT NOT NULL,
    role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL, source TEXT NOT NULL, data TEXT NOT NULL
);
"""


# The portal's sessions, kept on the server so logging out, a password change or an account's
# removal ends them (monitor/portal/sessions.py): the cookie carries the id, the table only its
# SHA-256 and an HMAC of the account's password hash when the session began.
PORTAL_SESSIONS = """
CREATE TABLE IF NOT EXISTS portal_sessions (
    id TEXT PRIMARY KEY, account TEXT NOT NULL, credential TEXT NOT NULL,
    created_us INTEGER NOT NULL, expires_us INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS portal_sessions_account ON portal_sessions (account, created_us);
"""


# Residents' complaints and the Town's triage (monitor/complaints/book.py owns them): the
# contact details stay in this row only; the chained record holds their salted SHA-256.
COMPLAINTS = """
CREATE TABLE IF NOT EXISTS complaints (
    id TEXT PRIMARY KEY, site TEXT NOT NULL, received_us INTEGER NOT NULL, what TEXT NOT NULL,
    start_us INTEGER NOT NULL, end_us INTEGER NOT NULL, address TEXT NOT NULL, plan_x REAL, plan_y REAL,
    description TEXT NOT NULL, contact TEXT NOT NULL, contact_salt TEXT NOT NULL,
    contact_sha256 TEXT NOT NULL, correlation TEXT NOT NULL, status TEXT NOT NULL, updated_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS complaints_time ON complaints (site, start_us);
CREATE TABLE IF NOT EXISTS complaint_changes (
    complaint_id TEXT NOT NULL REFERENCES complaints(id), seq INTEGER NOT NULL, change TEXT NOT NULL,
    status TEXT NOT NULL, actor TEXT NOT NULL, note TEXT NOT NULL, at_us INTEGER NOT NULL,
    notice_id TEXT NOT NULL DEFAULT '', data TEXT NOT NULL, PRIMARY KEY (complaint_id, seq)
);
CREATE INDEX IF NOT EXISTS complaint_changes_notice ON complaint_changes (notice_id);
"""


# A complaint's point clicked on the site plan, as WGS84 latitude and longitude (issue 26); the
# plan_x/plan_y of older complaints (metres typed on the operator's plan) stay as they were.
COMPLAINTS_POSITION = """
ALTER TABLE complaints ADD COLUMN lat REAL;
ALTER TABLE complaints ADD COLUMN lon REAL;
"""


# Compliance reports sent to the Town (monitor/reports/sending.py owns it): what was sent, the
# chain head its numbers were computed from and the SHA-256 of each file.
REPORTS = """
CREATE TABLE IF NOT EXISTS reports (
    id TEXT PRIMARY KEY, site TEXT NOT NULL, period_start_us INTEGER NOT NULL, period_end_us INTEGER NOT NULL,
    made_us INTEGER NOT NULL, chain_seq INTEGER NOT NULL, chain_head TEXT NOT NULL,
    pdf_sha256 TEXT NOT NULL, csv_sha256 TEXT NOT NULL, pdf_path TEXT NOT NULL, recipients TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_period ON reports (site, period_start_us);
"""


_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


def outbox_tables(name: str) -> str:
    """A FIFO table ``outbox_<name>`` plus ``outbox_<name>_rejected`` (monitor/influx/outbox.py)."""
    return (
        f"CREATE TABLE IF NOT EXISTS outbox_{name} ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"  # AUTOINCREMENT: ids never reused, so order holds
        " item TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0,"
        f" enqueued_at TEXT NOT NULL DEFAULT ({_NOW}));\n"
        f"CREATE TABLE IF NOT EXISTS outbox_{name}_rejected ("
        " id INTEGER PRIMARY KEY,"  # the id it had in the outbox
        " item TEXT NOT NULL,"
        " attempts INTEGER NOT NULL,"
        " enqueued_at TEXT NOT NULL,"
        " reason TEXT NOT NULL,"
        f" rejected_at TEXT NOT NULL DEFAULT ({_NOW}));\n"
    )


def outbox_taken_table(name: str) -> str:
    """``outbox_<name>_taken``: the last item each target took (monitor/influx/outbox.py), kept
    across restarts so the forwarder can tell a server's fault from its points' (``bisect_write``)."""
    return (
        f"CREATE TABLE IF NOT EXISTS outbox_{name}_taken ("
        " target TEXT PRIMARY KEY,"
        " item TEXT NOT NULL,"
        f" taken_at TEXT NOT NULL DEFAULT ({_NOW}));\n"
    )


def _to_layout_2(conn: sqlite3.Connection) -> str:
    """LAYOUT_2 for a store of layout 0 or 1 (sound without chain_seq); nothing otherwise."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sound)")}
    return LAYOUT_2 if columns and "chain_seq" not in columns else ""


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    sql: str | Callable[[sqlite3.Connection], str]  # or: the SQL to run, given the store as it is
    # The PRAGMA user_version it brings the store to: a store below it has not had it, whatever
    # is recorded (one written back to an older layout by an older minewatch).
    version: int = 0


# A seismograph event's waveforms, one row per chunk as it arrived (issue 27). Its summaries (the
# seismograph's own and the daemon's from these samples) are readings of kind "seismic" and
# "seismic-waveforms". Kept at least 3 years (SPS 307.31(4)), whatever storage.retention_days says.
WAVEFORMS = """
CREATE TABLE IF NOT EXISTS waveforms (
    site TEXT NOT NULL, sensor TEXT NOT NULL, event_id TEXT NOT NULL, chunk INTEGER NOT NULL,
    chunks INTEGER NOT NULL, ts_us INTEGER NOT NULL, header TEXT NOT NULL, samples BLOB NOT NULL,
    received_us INTEGER NOT NULL, PRIMARY KEY (site, sensor, event_id, chunk)
) WITHOUT ROWID;
"""

# The site's judged windows (the daemon's final look, minute by minute, coalesced): a second
# of a sensor's data is "judged" when it lies in one (the reports' completeness,
# queries.unjudged_seconds). A store judged before this table existed starts with one window
# from its first stored second to the final judging front it had reached (table progress).
JUDGED = """
CREATE TABLE IF NOT EXISTS judged (
    site TEXT NOT NULL, start_us INTEGER NOT NULL, end_us INTEGER NOT NULL, PRIMARY KEY (site, start_us)
) WITHOUT ROWID;
INSERT OR IGNORE INTO judged (site, start_us, end_us)
    SELECT site, first_us, final_until_us FROM (
        SELECT p.site, p.final_until_us,
            MIN((SELECT MIN(ts_us) FROM sound s WHERE s.site = p.site),
                COALESCE((SELECT MIN(ts_us) FROM readings r WHERE r.site = p.site), 9e18)) AS first_us
        FROM progress p)
    WHERE first_us IS NOT NULL AND first_us < final_until_us;
"""

# Per hour of each sound meter, the 0.1 dB histogram of its seconds' LAeq (bin = round(LAeq x 10)):
# the count and the energy sum 10^(LAeq/10) of each bin, kept by triggers as seconds are stored,
# changed or pruned, so that a week or month of hourly LAeq/L10/L90 reads these rows instead of
# every second (queries.hourly_levels_of_site). Filled from the seconds already stored.
SOUND_HOURS = """
CREATE TABLE IF NOT EXISTS sound_hours (
    site TEXT NOT NULL, hour INTEGER NOT NULL, sensor TEXT NOT NULL, bin INTEGER NOT NULL,
    n INTEGER NOT NULL, energy REAL NOT NULL,
    PRIMARY KEY (site, hour, sensor, bin)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS sound_hours_insert AFTER INSERT ON sound BEGIN
    INSERT INTO sound_hours VALUES (
        NEW.site, NEW.ts_us / 3600000000, NEW.sensor, CAST(round(NEW.LAeq * 10) AS INTEGER), 1,
        power(10, NEW.LAeq / 10.0)
    ) ON CONFLICT DO UPDATE SET n = n + 1, energy = energy + excluded.energy;
END;
CREATE TRIGGER IF NOT EXISTS sound_hours_delete AFTER DELETE ON sound BEGIN
    UPDATE sound_hours SET n = n - 1, energy = energy - power(10, OLD.LAeq / 10.0)
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER);
    DELETE FROM sound_hours
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER) AND n = 0;
END;
CREATE TRIGGER IF NOT EXISTS sound_hours_update AFTER UPDATE OF site, sensor, ts_us, LAeq ON sound BEGIN
    UPDATE sound_hours SET n = n - 1, energy = energy - power(10, OLD.LAeq / 10.0)
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER);
    DELETE FROM sound_hours
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER) AND n = 0;
    INSERT INTO sound_hours VALUES (
        NEW.site, NEW.ts_us / 3600000000, NEW.sensor, CAST(round(NEW.LAeq * 10) AS INTEGER), 1,
        power(10, NEW.LAeq / 10.0)
    ) ON CONFLICT DO UPDATE SET n = n + 1, energy = energy + excluded.energy;
END;
DELETE FROM sound_hours;
INSERT INTO sound_hours
    SELECT site, ts_us / 3600000000 AS hour, sensor, CAST(round(LAeq * 10) AS INTEGER) AS bin,
           COUNT(*), SUM(power(10, LAeq / 10.0))
    FROM sound GROUP BY site, hour, sensor, bin;
"""


# sound_hours from the seconds of finished hours, not second by second (issue 31). Kept by the
# triggers, an upsert per stored second cost more than the second's own row once a meter's levels
# vary (each second a bin of its own: 5 us against 1.8, docs/PERFORMANCE.md). Now sound_hours
# holds a site's hours before sound_hours_kept.until_hour, counted by Store.keep_sound_hours
# (the daemon, as each hour of data ends) in one GROUP BY; the triggers count only the seconds
# stored, pruned or changed in a kept hour (late data), and hourly_levels_of_site reads the hours
# after it from the seconds. A store's existing histograms cover every hour it has seconds of.
_KEPT = "(SELECT until_hour FROM sound_hours_kept WHERE site = {row}.site)"
SOUND_HOURS_KEPT = f"""
CREATE TABLE IF NOT EXISTS sound_hours_kept (
    site TEXT PRIMARY KEY, until_hour INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR REPLACE INTO sound_hours_kept SELECT site, MAX(hour) + 1 FROM sound_hours GROUP BY site;
DROP TRIGGER IF EXISTS sound_hours_insert;
DROP TRIGGER IF EXISTS sound_hours_delete;
DROP TRIGGER IF EXISTS sound_hours_update;
CREATE TRIGGER sound_hours_insert AFTER INSERT ON sound
WHEN NEW.ts_us / 3600000000 < {_KEPT.format(row="NEW")} BEGIN
    INSERT INTO sound_hours VALUES (
        NEW.site, NEW.ts_us / 3600000000, NEW.sensor, CAST(round(NEW.LAeq * 10) AS INTEGER), 1,
        power(10, NEW.LAeq / 10.0)
    ) ON CONFLICT DO UPDATE SET n = n + 1, energy = energy + excluded.energy;
END;
CREATE TRIGGER sound_hours_delete AFTER DELETE ON sound
WHEN OLD.ts_us / 3600000000 < {_KEPT.format(row="OLD")} BEGIN
    UPDATE sound_hours SET n = n - 1, energy = energy - power(10, OLD.LAeq / 10.0)
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER);
    DELETE FROM sound_hours
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER) AND n = 0;
END;
CREATE TRIGGER sound_hours_update AFTER UPDATE OF site, sensor, ts_us, LAeq ON sound BEGIN
    UPDATE sound_hours SET n = n - 1, energy = energy - power(10, OLD.LAeq / 10.0)
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER) AND OLD.ts_us / 3600000000 < {_KEPT.format(row="OLD")};
    DELETE FROM sound_hours
    WHERE site = OLD.site AND hour = OLD.ts_us / 3600000000 AND sensor = OLD.sensor
      AND bin = CAST(round(OLD.LAeq * 10) AS INTEGER) AND n = 0;
    INSERT INTO sound_hours SELECT
        NEW.site, NEW.ts_us / 3600000000, NEW.sensor, CAST(round(NEW.LAeq * 10) AS INTEGER), 1,
        power(10, NEW.LAeq / 10.0)
    WHERE NEW.ts_us / 3600000000 < {_KEPT.format(row="NEW")}
    ON CONFLICT DO UPDATE SET n = n + 1, energy = energy + excluded.energy;
END;
"""


# An episode's notice (queries.notice_of_episode, for every episode the status and the portal
# list) by an index seek, not a scan of every revision of every episode told (issue 31).
NOTICE_EPISODES_BY_EPISODE = """
CREATE INDEX IF NOT EXISTS notice_episodes_by_episode ON notice_episodes (episode_id, revision);
"""

# Readings of a kind over a time span (weather and turbidity for each judged minute, the
# seismic summaries for the early warnings, every tick) by an index seek: the key is
# (site, sensor, kind, ts_us), and without the sensor SQLite read every reading of the site,
# a cost that grew with the store's history.
READINGS_BY_KIND = """
CREATE INDEX IF NOT EXISTS readings_by_kind ON readings (site, kind, ts_us);
"""


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _shown_delivery_targets(conn: sqlite3.Connection) -> str:
    """Webhook deliveries stored before URLs were shown (monitor/shown_url.py): their target and
    the URL in their last error as shown, so a token in a receiver's URL stays in the configuration.
    Delivery finds a row's channel by the shown URL either way; chained alerts are left as they are."""
    from monitor.shown_url import shown_url  # here: the walking workers import this module lean

    updates = []
    rows = conn.execute("SELECT id, target, last_error FROM deliveries WHERE channel_type = 'webhook'")
    for delivery_id, target, error in rows:
        shown = shown_url(target)
        if shown != target:
            updates.append(
                f"UPDATE deliveries SET target = {_sql_text(shown)}, last_error ="
                f" {_sql_text(error.replace(target, shown))} WHERE id = {_sql_text(delivery_id)};"
            )
    return "\n".join(updates)


# A delivery's claim (monitor/notify/delivery.py): the sender sending it and until when (wall
# clock, microseconds); 0: no one. Two senders (the daemon, `minewatch report --send`) sent the
# same row at once without it.
DELIVERY_CLAIMS = """
ALTER TABLE deliveries ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN claim_until_us INTEGER NOT NULL DEFAULT 0;
"""


def _fingerprinted_delivery_targets(conn: sqlite3.Connection) -> str:
    """Webhook deliveries stored while a shown URL kept its path (``https://hooks.slack.com/
    services/T…/B…/SECRET``, a secret of chat services' hooks): their target and every URL in
    their last error as monitor/shown_url.py shows them now, scheme, host, port and a fingerprint
    of the rest. A row finds its channel either way (the shown form of its URL is the same); the
    chained alerts and the log keep what they said (docs/DEPLOY.md: rotate such tokens)."""
    from monitor.shown_url import (
        shown_url,
        shown_urls_in,
    )  # here: the walking workers import this module lean

    updates = []
    rows = conn.execute("SELECT id, target, last_error FROM deliveries WHERE channel_type = 'webhook'")
    for delivery_id, target, error in rows:
        shown, shown_error = shown_url(target), shown_urls_in(error)
        if (shown, shown_error) != (target, error):
            updates.append(
                f"UPDATE deliveries SET target = {_sql_text(shown)}, last_error = {_sql_text(shown_error)}"
                f" WHERE id = {_sql_text(delivery_id)};"
            )
    return "\n".join(updates)


def _shown_delivery_rows(conn: sqlite3.Connection) -> str:
    """Every webhook URL the deliveries table holds outside the chain, as monitor/shown_url.py
    shows it now: a webhook row's target and last error, and the copy of an "undeliverable" alert
    (its message, its data's target and error) in a row not delivered (pending or given up on):
    a pending copy went out to the operator's other channels with a URL shown an earlier way, a
    token in its path and all. The chained alert keeps what it said (docs/DEPLOY.md: rotate such
    tokens), and so does a copy delivered already, a record of what was sent."""
    # here: the walking workers import this module lean
    from monitor.shown_url import shown_url, shown_urls_in
    from monitor.wire.canonical import canonical_text

    updates = []
    rows = conn.execute(
        "SELECT id, channel_type, target, last_error, alert, status FROM deliveries WHERE channel_type ="
        " 'webhook' OR (status <> 'delivered' AND instr(alert, '\"kind\":\"undeliverable\"') > 0)"
    )  # an alert's copy is canonical JSON (no spaces)
    for delivery_id, channel_type, target, error, alert_text, status in rows:
        changes = {}
        if channel_type == "webhook":
            changes = {"target": shown_url(target), "last_error": shown_urls_in(error)}
        alert = json.loads(alert_text)
        if status != "delivered" and alert.get("kind") == "undeliverable":
            changes["alert"] = canonical_text(_shown_undeliverable(alert, shown_url, shown_urls_in))
        old = {"target": target, "last_error": error, "alert": alert_text}
        sets = [f"{column} = {_sql_text(value)}" for column, value in changes.items() if value != old[column]]
        if sets:
            updates.append(f"UPDATE deliveries SET {', '.join(sets)} WHERE id = {_sql_text(delivery_id)};")
    return "\n".join(updates)


def _shown_undeliverable(
    alert: dict[str, Any], shown_url: Callable[[str], str], shown_urls_in: Callable[[str], str]
) -> dict[str, Any]:
    """An "undeliverable" alert's body with every URL in it shown (the target a webhook's)."""
    data = dict(alert.get("data") or {})
    if data.get("channel_type") == "webhook" and isinstance(data.get("target"), str):
        data["target"] = shown_url(data["target"])
    if isinstance(data.get("error"), str):
        data["error"] = shown_urls_in(data["error"])
    return {**alert, "message": shown_urls_in(str(alert.get("message", ""))), "data": data}


def _report_copies_without_paths(conn: sqlite3.Connection) -> str:
    """The copy of a report alert in a row not delivered (pending or given up on) without the
    paths of the report's files its data named (``report_pdf``, ``report_csv``): where the
    operator keeps them is not the Town's, and the delivery finds the files through the report's
    row now (monitor/journal/report_files.py, ``report_files``). It goes under a key of its own
    (``Deliveries._sent_key``). The chained alert keeps what it said, and so does a copy
    delivered already, a record of what was sent."""
    from monitor.journal.report_files import PATH_MEMBERS  # here: the walking workers import this module lean
    from monitor.wire.canonical import canonical_text

    updates = []
    rows = conn.execute(
        "SELECT id, alert FROM deliveries WHERE status <> 'delivered'"
        ' AND instr(alert, \'"kind":"report"\') > 0'
    )  # an alert's copy is canonical JSON (no spaces)
    for delivery_id, alert_text in rows:
        alert = json.loads(alert_text)
        data = alert.get("data")
        if alert.get("kind") != "report" or not isinstance(data, dict):
            continue
        kept = {k: v for k, v in data.items() if k not in PATH_MEMBERS}
        if kept != data:
            copy = _sql_text(canonical_text({**alert, "data": kept}))
            updates.append(f"UPDATE deliveries SET alert = {copy} WHERE id = {_sql_text(delivery_id)};")
    return "\n".join(updates)


# Whether the meter was overloaded in the second (IEC 61672-1 5.11): 1, or NULL as in every row
# stored before (their records, and so their digests, have no such field). The partial index
# finds a window's overloaded seconds without reading its others (an evidence export asks).
def _sound_overload(conn: sqlite3.Connection) -> str:
    """The column where the sound table lacks it (as a layout-2 rewrite of an older store does)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sound)")}
    add = "" if "overload" in columns else "ALTER TABLE sound ADD COLUMN overload INTEGER;\n"
    return add + "CREATE INDEX IF NOT EXISTS sound_overloaded ON sound (site, ts_us) WHERE overload;"


MIGRATIONS: tuple[Migration, ...] = (
    Migration("store-layout-2", _to_layout_2, version=2),
    Migration("store", STORE, version=2),  # layout 2 (IF NOT EXISTS: it completes an older one)
    Migration("alerts", ALERTS),
    Migration("notices", NOTICES),
    Migration("deliveries", DELIVERIES),
    Migration("outbox-influx", outbox_tables("influx")),
    Migration("portal-actions", PORTAL_ACTIONS),
    Migration("portal-sessions", PORTAL_SESSIONS),
    Migration("complaints", COMPLAINTS),
    Migration("reports", REPORTS),
    Migration("waveforms", WAVEFORMS),
    Migration("judged", JUDGED),
    Migration("sound-hours", SOUND_HOURS),
    Migration("complaints-position", COMPLAINTS_POSITION),
    Migration("notice-episodes-by-episode", NOTICE_EPISODES_BY_EPISODE),
    Migration("readings-by-kind", READINGS_BY_KIND),
    Migration("deliveries-shown-targets", _shown_delivery_targets),
    Migration("deliveries-claims", DELIVERY_CLAIMS),
    Migration("deliveries-shown-fingerprints", _fingerprinted_delivery_targets),
    Migration("sound-overload", _sound_overload, version=2),
    Migration("outbox-influx-taken", outbox_taken_table("influx")),
    Migration("deliveries-shown-alert-copies", _shown_delivery_rows),
    # A token in the host shown as a fingerprint (monitor/shown_url.py): the same rewrite again.
    Migration("deliveries-shown-hosts", _shown_delivery_rows),
    # A relay's receiver name in the host (a quick tunnel's words) shown as a fingerprint: again.
    Migration("deliveries-shown-relay-hosts", _shown_delivery_rows),
    # The same for the relays listed since (pinggy, Tailscale Funnel).
    Migration("deliveries-shown-more-relay-hosts", _shown_delivery_rows),
    Migration("deliveries-report-copies-without-paths", _report_copies_without_paths),
    Migration("sound-hours-kept", SOUND_HOURS_KEPT),
)


def newer_layout(path: str, version: int) -> str:
    """The refusal of a store a newer minewatch made: no opening of this one reads it."""
    return (
        f"the store {path!r} has layout version {version}, newer than this minewatch reads"
        f" ({SCHEMA_VERSION}): upgrade minewatch"
    )


def older_layout(path: str, config: str, again: str) -> str:
    """What a command that reads the store as it is (read-only: evidence, verify of a report)
    says of an older minewatch's store, which it cannot migrate: `minewatch status`, the
    lightest command that opens it as the daemon does (Store), brings it to this layout, then
    ``again`` ("verify again")."""
    return (
        f"the store {path!r} is an older minewatch's: open it once with `minewatch status --config"
        f" {config}` (which brings it to this layout) and {again}"
    )


def layout_refusal(conn: sqlite3.Connection, path: str, config: str, again: str) -> str | None:
    """Why a read-only reader cannot read the store open as ``conn`` as this minewatch lays it
    out (newer_layout, older_layout), in one line; None when every migration is applied."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        return newer_layout(path, version)
    return older_layout(path, config, again) if pending(conn) else None


def applied(conn: sqlite3.Connection) -> list[str]:
    """The names of the migrations applied to the store, in the order they ran."""
    try:
        return [r[0] for r in conn.execute(f"SELECT name FROM {TABLE} ORDER BY rowid")]
    except sqlite3.OperationalError:  # a store made before the registry
        return []


def pending(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> bool:
    """Whether ``apply`` has a migration to run on this store."""
    return not _done(conn, migrations) >= {m.name for m in migrations}


def _done(conn: sqlite3.Connection, migrations: tuple[Migration, ...]) -> set[str]:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    recorded = set(applied(conn))
    return {m.name for m in migrations if m.name in recorded and version >= m.version}


def apply(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[str]:
    """Apply each migration not yet recorded, in order, each in one transaction with its record.

    Only outside a transaction (executescript would commit the caller's); returns the names
    applied now.
    """
    if conn.in_transaction:
        return []
    done = _done(conn, migrations)
    if done >= {m.name for m in migrations}:
        return []
    conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, applied_us INTEGER NOT NULL)")
    ran = []
    for migration in migrations:
        if migration.name in done:
            continue
        sql = migration.sql if isinstance(migration.sql, str) else migration.sql(conn)
        record = f"INSERT OR REPLACE INTO {TABLE} VALUES ('{migration.name}', {time.time_ns() // 1000});"
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{sql}\n{record}\nCOMMIT;")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        ran.append(migration.name)
    return ran
