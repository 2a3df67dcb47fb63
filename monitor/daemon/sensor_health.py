"""Sensor health and calibration: offline/online, clock drift, calibration drift, offsets.

The pipeline tells this module what it heard (a reading, a heartbeat) and asks it, on
each tick, who has gone silent; the transitions are journaled in the store, written as
``sensor_health`` points and raised as alerts here. The arithmetic of a calibration
check is ``iec61672.calibration_drift``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from monitor.acoustics import iec61672
from monitor.config import DaemonConfig, SiteConfig
from monitor.influx import points
from monitor.influx.points import WritePoint
from monitor.journal.store import Store
from monitor.notify.alerts import Alert, AlertBook
from monitor.wire.protocol import format_ts
from rules.model import SensorStatus, SoundLevels


@dataclass
class SensorHealth:
    last_seen: datetime
    online: bool = True
    offline_since: datetime | None = None
    town_alerted: bool = False
    heard: bool = False  # last_seen is a reading's time (not the start's clock)
    # When something of it last arrived (the daemon's clock then). A sensor sending its
    # backlog after an outage is alive though its readings' times lag: silence is counted
    # from the later of the two, or each tick of the backfill would take it offline again.
    arrived: datetime | None = None


def calibrated(levels: SoundLevels, offset_db: float | None) -> SoundLevels:
    """``levels`` with the sensor's calibration offset added to every level (None: unchanged)."""
    if offset_db is None:
        return levels
    offset = offset_db

    def shift(v: float | None) -> float | None:
        return None if v is None else v + offset

    return SoundLevels(
        levels.site,
        levels.sensor,
        levels.ts,
        levels.duration_s,
        levels.LAeq + offset,
        levels.LAFmax + offset,
        levels.LCpeak + offset,
        shift(levels.LASmax),
        shift(levels.LZpeak),
        shift(levels.LAFmin),
        shift(levels.LCeq),
        shift(levels.LZeq),
        levels.overload,
    )


class HealthWatch:
    """Journals, points and alerts for sensor health; the per-sensor state is the caller's."""

    def __init__(
        self, store: Store, alerts: AlertBook, daemon: DaemonConfig, write_point: WritePoint
    ) -> None:
        self.store = store
        self.alerts = alerts
        self.daemon = daemon
        self.write_point = write_point

    def heard(
        self,
        site: str,
        sensor: str,
        health: SensorHealth | None,
        ts: datetime,
        now: datetime,
        arrived: datetime | None = None,
    ) -> None:
        """A reading of ``sensor`` stamped ``ts`` was stored (``arrived``: when, ``now`` by
        default): move its last-seen time on.

        A sensor that was offline comes back: journaled online in the store, a point written
        and its offline alert cleared (telling the town too if the town was told it went).
        """
        if health is None:
            return
        arrived = arrived or now
        if health.arrived is None or arrived > health.arrived:
            health.arrived = arrived
        if ts > health.last_seen or not health.online or not health.heard:
            health.last_seen = ts if not health.heard else max(ts, health.last_seen)
            health.heard = True
        if health.online:
            return
        gap = (now - (health.offline_since or now)).total_seconds()
        health.online = True
        self.store.append_health(site, sensor, now, "online", gap, "", now)
        self.write_point(points.sensor_health, site, sensor, True, now, gap)
        self.alerts.clear(
            site,
            f"offline:{sensor}",
            f"Sensor {sensor} is back online after {gap / 60:.1f} minutes without data",
            now,
            audiences=("operator", "town") if health.town_alerted else ("operator",),
        )
        # The town's condition ends too (said once, above), so its next outage is told again.
        self.alerts.clear(site, f"offline-town:{sensor}", "", now, audiences=())
        health.town_alerted = False

    def check_silence(
        self,
        site: SiteConfig,
        health: dict[str, SensorHealth],
        now: datetime,
        data_start: datetime | None = None,
    ) -> None:
        """Mark sensors silent past their expected period offline (operator), then for long (town).

        ``data_start`` (data clock): the first data time; a sensor not heard since start-up is
        silent from then, not from the wall-clock moment the daemon started (an event-only
        sensor such as a seismograph may send nothing in a whole simulated day).
        """
        d = self.daemon
        for sensor in site.sensors:
            state = health[sensor.id]
            if state.last_seen > now and not state.heard:
                state.last_seen = now  # started before the data clock existed: count from its start
            elif data_start is not None and not state.heard and state.last_seen < data_start:
                state.last_seen = data_start  # started after it (wall clock behind the data)
            # Heard after ``now`` (the data clock's periodic work steps through data already in):
            # not silent then.
            heard_at = state.last_seen if state.arrived is None else max(state.last_seen, state.arrived)
            silent = max(0.0, (now - heard_at).total_seconds())
            limit = sensor.expected_period_s * d.offline_after_periods
            if state.online and silent > limit:
                state.online = False
                state.offline_since = state.last_seen
                self.store.append_health(
                    site.id,
                    sensor.id,
                    state.last_seen,
                    "offline",
                    None,
                    f"silent for {silent:.0f} s (expected every {sensor.expected_period_s:g} s)",
                    now,
                )
                self.write_point(points.sensor_health, site.id, sensor.id, False, now)
                self.alerts.raise_(
                    Alert(
                        site.id,
                        ("operator",),
                        "sensor_offline",
                        "warning",
                        f"offline:{sensor.id}",
                        f"Sensor {sensor.id} ({sensor.location or sensor.kind.value}) has sent nothing "
                        f"since {format_ts(state.last_seen)}",
                        {"sensor": sensor.id},
                    ),
                    now,
                )
            elif not state.online and not state.town_alerted and silent > d.town_offline_alert_s:
                state.town_alerted = True
                self.alerts.raise_(
                    Alert(
                        site.id,
                        ("town",),
                        "sensor_offline",
                        "warning",
                        f"offline-town:{sensor.id}",
                        f"Sensor {sensor.id} at {site.name} has been offline for {silent / 60:.0f} minutes",
                        {"sensor": sensor.id},
                    ),
                    now,
                )

    def on_status(self, site: str, status: SensorStatus, now: datetime) -> None:
        """A stored heartbeat: its point, its clock offset against the limit, its calibration check."""
        self.write_point(points.heartbeat, status)
        self._check_clock(site, status, now)
        self._check_calibration(site, status, now)

    def _check_clock(self, site: str, status: SensorStatus, now: datetime) -> None:
        limit = self.daemon.clock_drift_limit_s
        condition = f"clock:{status.sensor}"
        if status.clock_offset_s is not None and abs(status.clock_offset_s) > limit:
            self.alerts.raise_(
                Alert(
                    site,
                    ("operator",),
                    "clock_drift",
                    "warning",
                    condition,
                    f"Sensor {status.sensor} reports its clock {status.clock_offset_s:+.1f} s off "
                    f"(limit {limit:g} s); its timestamps may be wrong",
                    {"sensor": status.sensor},
                ),
                now,
            )
        elif status.clock_offset_s is not None:
            self.alerts.clear(site, condition, "", now, audiences=())

    def _check_calibration(self, site: str, status: SensorStatus, now: datetime) -> None:
        reference, measured = status.calibration_reference_db, status.calibration_measured_db
        if reference is None or measured is None:
            return
        previous = self.store.last_calibration(site, status.sensor)
        offset = iec61672.calibration_offset(reference, measured)
        check = (
            None
            if previous is None
            else iec61672.calibration_drift(
                iec61672.calibration_offset(previous["reference_db"], previous["measured_db"]), offset
            )
        )
        drift = None if check is None else check.drift_db
        off = abs(offset) > iec61672.CALIBRATION_OFFSET_LIMIT_DB
        flagged = off or (check is not None and check.flagged)
        self.store.append_calibration(
            site, status.sensor, status.ts, reference, measured, drift, flagged, now
        )
        if off:
            self.alerts.raise_(
                Alert(
                    site,
                    ("operator", "town"),
                    "calibration_offset",
                    "warning",
                    f"calibration-offset:{status.sensor}:{format_ts(status.ts)}",
                    f"Sensor {status.sensor} read its {reference:g} dB calibrator as {measured:.1f} dB "
                    f"({offset:+.2f} dB, more than {iec61672.CALIBRATION_OFFSET_LIMIT_DB:g} dB off): its "
                    "levels are in doubt until its calibration (full_scale_db) or microphone is corrected",
                    {"sensor": status.sensor, "offset_db": offset},
                ),
                now,
            )
        if check is not None and check.flagged:
            self.alerts.raise_(
                Alert(
                    site,
                    ("operator", "town"),
                    "calibration_drift",
                    "warning",
                    f"calibration:{status.sensor}:{format_ts(status.ts)}",
                    f"Sensor {status.sensor} calibration moved {check.drift_db:+.2f} dB since the last check "
                    f"(more than {iec61672.CALIBRATION_DRIFT_LIMIT_DB:g} dB): its measurements since then "
                    "are in doubt",
                    {"sensor": status.sensor, "drift_db": check.drift_db},
                ),
                now,
            )
