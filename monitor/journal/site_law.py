"""The site's own blasting record as its site law, and the forecasts of pending blasts (issue 27).

Reads the journal (every seismograph event, blast and blast notice of a site) and hands pure
records to rules.ground_vibration / rules.scaled_distance: for the daemon's early warnings and
the portal's status and events pages alike.
"""

from __future__ import annotations

from datetime import datetime

from monitor.config import SiteConfig
from monitor.journal.store import Store
from rules.ground_vibration import GroundVibrationParams, site_law_points
from rules.model import Blast, BlastNotice, SensorKind, SiteLawPoint
from rules.profile import Profile
from rules.scaled_distance import Forecast, pending_notices


def vibration_params(profile: Profile) -> GroundVibrationParams | None:
    standard = next((s for s in profile.standards.values() if s.rule == "ground_vibration"), None)
    return None if standard is None else standard.params


def site_law_of(store: Store, site: SiteConfig, params: GroundVibrationParams) -> tuple[SiteLawPoint, ...]:
    """Each recorded seismograph event whose blast's notice gave its charge per delay, with the
    monitoring point's distance (the seismograph's ``distance_m``, else the notice's)."""
    locations = {s.id: s.location for s in site.sensors if s.location}
    distances = {s.id: s.distance_m for s in site.sensors if s.distance_m is not None}
    seismographs = [s.id for s in site.sensors if s.kind == SensorKind.SEISMOGRAPH]
    seismic, events = store.blast_history(site.id, locations, seismographs=seismographs)
    blasts = tuple(e for e in events if isinstance(e, Blast))
    notices = tuple(e for e in events if isinstance(e, BlastNotice))
    return site_law_points(params, seismic, blasts, notices, distances)


def forecasts(store: Store, site: SiteConfig, profile: Profile, now: datetime) -> list[Forecast]:
    """The forecast of each pending blast whose notice carries its charge and distance (planned
    at or after ``now``, not yet fired), by planned time; [] when no rule judges vibration."""
    params = vibration_params(profile)
    if params is None:
        return []
    _, events = store.blast_history(site.id, {}, seismic=False)
    fired = {e.id for e in events if isinstance(e, Blast)}
    pending = pending_notices([e for e in events if isinstance(e, BlastNotice)], fired, now)
    if not pending:
        return []
    points = site_law_of(store, site, params)
    ahead = [params.forecast(n, points) for n in sorted(pending, key=lambda n: n.planned_ts)]
    return [f for f in ahead if f is not None]
