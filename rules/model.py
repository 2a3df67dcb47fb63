"""Domain types shared by the pure rules, the daemon and the edge code.

Every timestamp is a timezone-aware ``datetime`` in UTC. A per-period record's
``ts`` is the *start* of its period; ``end`` is ``ts + duration_s``.

These types are the contract between the layers:

    wire.decode (monitor)  ->  Readings / Events (here)  ->  rules.evaluate  ->  Finding (here)

Nothing in this module does I/O or reads the clock.
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple, TypeAlias
from zoneinfo import ZoneInfo

# ---------------------------------------------------------------------------
# Site description (built from configuration, passed to every rule)
# ---------------------------------------------------------------------------


class SensorKind(enum.StrEnum):
    SOUND = "sound"
    LIGHT = "light"
    SKY = "sky"  # sky-facing light sensor (upward light, 6.C.5)
    WEATHER = "weather"
    TURBIDITY = "turbidity"  # NTU, land-disturbing profiles
    SEISMOGRAPH = "seismograph"  # triaxial geophone and linear airblast microphone (SPS 307, 6.F)


class Placement(enum.StrEnum):
    BOUNDARY = "boundary"  # mine-site boundary segment
    CONVEYOR = "conveyor"  # conveyor parcel perimeter (6.G): counts as boundary for noise
    SKY = "sky"
    SITE = "site"  # anywhere on site (weather station)
    BUFFER_LINE = "buffer_line"  # turbidity at the 25 % buffer line (28-5(a))
    REFERENCE = "reference"  # turbidity upstream / away from the site
    STRUCTURE = "structure"  # a seismograph at the nearest dwelling or structure outside the controlled area


@dataclass(frozen=True, slots=True)
class SensorInfo:
    id: str
    kind: SensorKind
    placement: Placement
    location: str = ""  # boundary segment or parcel name, free text for people
    gates: tuple[str, ...] = ()  # haul gates this sensor stands near

    @property
    def at_boundary(self) -> bool:
        return self.placement in (Placement.BOUNDARY, Placement.CONVEYOR)


@dataclass(frozen=True, slots=True)
class AdjoiningOwner:
    """An owner who must get blast notices: Dovre 6.F, "all owners of adjacent property lying
    within one-half (1/2) mile of the nonmetallic mine site". That is not section 2's defined
    "adjoining property" (parcels within 1/2 mile with a residence existing at adoption): 6.F
    names no residence, so the Town lists every such owner, with a residence or not.

    A blast notice reaches this owner when one of its recipients equals ``id`` or ``name``
    (case and spacing ignored).
    """

    id: str
    name: str = ""
    parcel: str = ""  # legal description or parcel number, for people

    @property
    def label(self) -> str:
        parcel = f", parcel {self.parcel}" if self.parcel else ""
        return f"{self.name or self.id} ({self.id}{parcel})" if self.name else f"{self.id}{parcel}"


@dataclass(frozen=True, slots=True)
class TownContact:
    """A person or office of the Town who takes blast notices for it (6.F "notice ... to the
    Town"), listed in the site configuration with an id.

    A blast notice reaches the Town when one of its recipients equals a contact's ``id`` or
    ``name`` (case and spacing ignored), or one of the profile's ``town_recipients``.
    """

    id: str
    name: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass(frozen=True, slots=True)
class SiteContext:
    id: str
    name: str
    timezone: str  # IANA name
    latitude: float
    longitude: float
    preexisting: bool = False  # section 1.4.C
    sensors: Mapping[str, SensorInfo] = field(default_factory=dict)
    flags: Mapping[str, Any] = field(default_factory=dict)  # site facts a profile rule may need
    adjoining_owners: tuple[AdjoiningOwner, ...] = ()  # blast-notice recipients besides the Town
    town_contacts: tuple[TownContact, ...] = ()  # who takes blast notices for the Town
    gate_names: Mapping[str, str] = field(default_factory=dict)  # haul gate id -> configured name

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def local(self, ts: datetime) -> datetime:
        return ts.astimezone(self.tz)

    def gate_label(self, gate: str) -> str:
        """'the North gate on 10th Avenue (gate-north)', or 'gate g1' unnamed: the name people know."""
        name = self.gate_names.get(gate, "")
        return f"the {name} ({gate})" if name else f"gate {gate}"


# ---------------------------------------------------------------------------
# Readings (measurements from edge sensors)
# ---------------------------------------------------------------------------


class SoundLevels(NamedTuple):
    """Sound metrics over one period (normally 1 s), levels in dB re 20 uPa.

    A NamedTuple rather than a frozen dataclass like its siblings: one is built per sensor
    per second, and a tuple is built in C, three times faster than a frozen dataclass's
    field-by-field __init__ (bench/ingest.py).
    """

    site: str
    sensor: str
    ts: datetime
    duration_s: float
    LAeq: float
    LAFmax: float
    LCpeak: float
    LASmax: float | None = None
    LZpeak: float | None = None
    LAFmin: float | None = None
    LCeq: float | None = None
    LZeq: float | None = None
    # The meter was overloaded (its converter reached full scale) during the period, so its
    # levels are lower bounds (IEC 61672-1 5.11): "at least", never evidence of compliance.
    overload: bool = False

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


@dataclass(frozen=True, slots=True)
class LightSummary:
    """Illuminance summary in lux, with an optional raw burst for flashing detection."""

    site: str
    sensor: str
    ts: datetime
    duration_s: float
    lux_mean: float
    lux_min: float
    lux_max: float
    burst: tuple[float, ...] = ()
    burst_rate_hz: float | None = None

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


@dataclass(frozen=True, slots=True)
class WeatherReading:
    site: str
    sensor: str
    ts: datetime
    duration_s: float
    wind_speed_ms: float
    rain: bool
    rain_mm_h: float | None = None

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


@dataclass(frozen=True, slots=True)
class TurbidityReading:
    site: str
    sensor: str
    ts: datetime
    duration_s: float
    ntu: float

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


@dataclass(frozen=True, slots=True)
class SensorStatus:
    """Heartbeat from a sensor: battery, clock offset, optional calibration check."""

    site: str
    sensor: str
    ts: datetime
    battery_pct: float | None = None
    clock_offset_s: float | None = None
    calibration_reference_db: float | None = None
    calibration_measured_db: float | None = None


Reading: TypeAlias = SoundLevels | LightSummary | WeatherReading | TurbidityReading


@dataclass(frozen=True, slots=True)
class AxisPeak:
    """One geophone axis of a seismograph event: its peak particle velocity and frequencies."""

    axis: str  # "T", "V" or "L"
    ppv_mm_s: float
    zc_hz: float | None  # zero-crossing frequency of the half-cycle holding the peak
    fft_hz: float | None = None  # dominant frequency of the spectrum
    clipped: bool = False  # the channel reached its range: the true peak is at least ppv_mm_s

    @property
    def judged_hz(self) -> float | None:
        """The frequency a limit curve is read at: the zero-crossing one, else the spectrum's."""
        return self.zc_hz if self.zc_hz is not None else self.fft_hz


@dataclass(frozen=True, slots=True)
class SeismicEvent:
    """A seismograph event at a monitoring point (SPS 307 "blasting resultants"), as judged.

    ``source``: "waveforms" when the daemon computed the summary from the event's waveforms,
    "edge" when only the seismograph's own summary has arrived (its waveforms not all in).
    Velocities in mm/s, pressure in Pa; ``ts`` is the record's first sample.
    """

    site: str
    sensor: str
    id: str  # the seismograph's event id
    ts: datetime
    duration_s: float
    axes: tuple[AxisPeak, ...]
    pvs_mm_s: float
    airblast_pa: float | None = None
    mic_low_hz: float | None = None  # the microphone's low-frequency limit (-3 dB), Hz
    mic_clipped: bool = False
    source: str = "waveforms"
    location: str = ""  # the monitoring point (structure), from the configuration
    blast_id: str | None = None  # the blast the seismograph was armed for, if it said
    # the largest C-weighted slow-response level of the microphone's waveform, dB(C) (None: not known)
    airblast_dbc_slow: float | None = None

    @property
    def airblast_db(self) -> float | None:
        if self.airblast_pa is None or self.airblast_pa <= 0:
            return None
        return 20.0 * math.log10(self.airblast_pa / 20e-6)

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


# ---------------------------------------------------------------------------
# Operator events
# ---------------------------------------------------------------------------


class WorkKind(enum.StrEnum):
    SITE_PREPARATION = "site_preparation"
    CONSTRUCTION = "construction"
    RESTORATION = "restoration"
    REPAIR = "repair"


@dataclass(frozen=True, slots=True)
class BlastNotice:
    site: str
    id: str  # the blast_id the notice announces
    issued_ts: datetime
    planned_ts: datetime
    recipients: tuple[str, ...] = ()
    # The planned blast's design, for the scaled distance before it (issue 27): SI, whatever
    # units the notice was written in.
    charge_kg_per_delay: float | None = None
    distance_m: float | None = None  # to the nearest structure


@dataclass(frozen=True, slots=True)
class Blast:
    site: str
    id: str  # blast_id
    ts: datetime  # detonation
    safety_reason: str | None = None
    charge_kg: float | None = None
    overpressure_db: float | None = None  # linear (Z) peak at the nearest monitor, if the record has one


@dataclass(frozen=True, slots=True)
class TruckPassage:
    site: str
    id: str
    ts: datetime
    gate: str
    direction: str  # "in" | "out"
    truck_id: str | None = None


@dataclass(frozen=True, slots=True)
class WorkPeriod:
    site: str
    id: str
    start: datetime
    end: datetime
    kind: WorkKind
    sensors: tuple[str, ...] = ()  # empty: all sensors of the site


@dataclass(frozen=True, slots=True)
class TemporaryLighting:
    site: str
    id: str
    start: datetime
    end: datetime
    description: str = ""


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """An operator event of a kind a profile defines (e.g. ``slope-exposed``).

    Profiles for other ordinances add event kinds without new wire code: the
    payload's fields are kept as they came, after the common fields are checked.
    """

    site: str
    id: str
    kind: str
    ts: datetime
    fields: Mapping[str, Any] = field(default_factory=dict)


Event: TypeAlias = BlastNotice | Blast | TruckPassage | WorkPeriod | TemporaryLighting | GenericEvent


class EventSpan(NamedTuple):
    """An event's times: since when it is on record, when it happens, and when that ends."""

    since: datetime  # the event row's start: a blast notice's issue, otherwise ``start``
    start: datetime  # when it happens: an instant's time, a period's start, a noticed blast's time
    end: datetime | None  # a period's end, a noticed blast's time; None for an instant

    @property
    def until(self) -> datetime:
        """When what happens is over: the end, or the moment of an instant."""
        return self.start if self.end is None else self.end


def event_span(event: Event) -> EventSpan:
    """The one reading of an event's times (the store's row, InfluxDB's point, the re-judged minutes).

    A blast notice is on record from its issue until the blast it announces, and happens
    (for the minutes judged again, for InfluxDB) at the planned blast.
    """
    if isinstance(event, BlastNotice):
        return EventSpan(event.issued_ts, event.planned_ts, event.planned_ts)
    if isinstance(event, WorkPeriod | TemporaryLighting):
        return EventSpan(event.start, event.start, event.end)
    return EventSpan(event.ts, event.ts, None)


# A vehicle (haul truck, loader, service truck) present at a gate or near some sensors, e.g. from a
# gate camera or the operator's log: lights on vehicles and moving equipment are exempt (Dovre 6.C.3).
# It travels as a profile-defined GenericEvent of this kind (a profile lists it in ``event_kinds``);
# monitor.wire.codec checks its fields: ``ts`` (arrival), optional ``end``, ``gate``, ``sensors``,
# ``description``.
VEHICLE_PRESENT = "vehicle-present"


@dataclass(frozen=True, slots=True)
class VehiclePresence:
    """The typed view of a ``vehicle-present`` event; ``end`` None: seen at ``start`` only."""

    site: str
    id: str
    start: datetime
    end: datetime | None
    gate: str | None = None
    sensors: tuple[str, ...] = ()
    description: str = ""

    @classmethod
    def from_event(cls, event: GenericEvent) -> VehiclePresence:
        """ValueError("field: reason") for a field the wire would have refused."""
        fields = event.fields
        end = fields.get("end")
        try:
            end_ts = datetime.fromisoformat(str(end)) if end else None
        except ValueError:
            raise ValueError(f"end: not a timestamp: {end!r}") from None
        if end_ts is not None and end_ts.tzinfo is None:
            raise ValueError(f"end: needs a UTC offset: {end!r}")
        gate = fields.get("gate")
        sensors = fields.get("sensors") or ()
        if gate is not None and not isinstance(gate, str):
            raise ValueError(f"gate: expected a string, got {gate!r}")
        if not isinstance(sensors, list | tuple) or not all(isinstance(x, str) for x in sensors):
            raise ValueError(f"sensors: expected a list of strings, got {sensors!r}")
        return cls(
            event.site,
            event.id,
            event.ts,
            end_ts,
            gate or None,
            tuple(sensors),
            str(fields.get("description") or ""),
        )


# ---------------------------------------------------------------------------
# Findings (what the rules conclude)
# ---------------------------------------------------------------------------


class FindingKind(enum.StrEnum):
    VIOLATION = "violation"
    EXEMPT_EXCEEDANCE = "exempt_exceedance"
    UNRELIABLE = "unreliable"  # exceedance that depends on weather-affected data
    WARNING = "warning"  # early warning for the operator
    SAFETY_EXCEPTION = "safety_exception"  # late blast with a safety reason (6.F)
    UNREPORTED_BLAST = "unreported_blast"
    COMPLIANT = "compliant"  # an explicit pass (a blast inside the window), kept as evidence
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Measurement:
    name: str  # e.g. "LAeq,1min"
    value: float
    limit: float | None = None
    unit: str = ""
    # The value read is a lower bound, not a measurement (a meter overloaded: clipped sound reads
    # low, IEC 61672-1 5.11): every surface says "at least" (rules.quantities.measurement_text).
    lower_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        """The measurement as findings, notices and the API give it; ``lower_bound`` only when
        set, so every other measurement (and the digest of each record holding one) is as before."""
        d: dict[str, Any] = {"name": self.name, "value": self.value, "limit": self.limit, "unit": self.unit}
        if self.lower_bound:
            d["lower_bound"] = True
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Measurement:
        return cls(d["name"], d["value"], d["limit"], d["unit"], bool(d.get("lower_bound", False)))


@dataclass(frozen=True, slots=True)
class Finding:
    site: str
    standard: str  # profile key of the standard, e.g. "noise", "blasting_window"
    section: str  # ordinance section cited, e.g. "6.D"
    kind: FindingKind
    start: datetime
    end: datetime
    timezone: str
    summary: str  # one human sentence
    sensors: tuple[str, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    exemptions: tuple[str, ...] = ()  # reasons considered, e.g. "truck t-17 at gate north (in)"
    refs: tuple[str, ...] = ()  # readings and events used: "sound:n1:2026-06-15T11:30:00Z", "blast:b-7"
    completeness: float = 1.0  # fraction of expected data present
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Deterministic id: re-evaluating the same interval yields the same id."""
        key = "|".join(
            [self.site, self.standard, self.kind.value, ",".join(self.sensors), self.start.isoformat()]
        )
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    @property
    def start_local(self) -> datetime:
        return self.start.astimezone(ZoneInfo(self.timezone))

    @property
    def end_local(self) -> datetime:
        return self.end.astimezone(ZoneInfo(self.timezone))


_TS = attrgetter("ts")


@dataclass(frozen=True, slots=True)
class SiteLawPoint:
    """One recorded blast at one seismograph: its scaled distance and the PPV measured."""

    blast_id: str
    sensor: str
    ts: datetime
    charge_kg_per_delay: float
    distance_m: float
    ppv_mm_s: float  # the greatest axis PPV

    @property
    def sd(self) -> float:
        return self.distance_m / math.sqrt(self.charge_kg_per_delay)


@dataclass(frozen=True, slots=True)
class SiteData:
    """Everything the rules may look at for one site and one evaluation window.

    The shell fills it from its per-site state; each sequence is sorted by time (``sound``
    built by ``grouped``: by sensor, then time).
    ``other_events`` holds GenericEvents of profile-defined kinds.
    """

    sound: tuple[SoundLevels, ...] = ()
    light: tuple[LightSummary, ...] = ()
    weather: tuple[WeatherReading, ...] = ()
    turbidity: tuple[TurbidityReading, ...] = ()
    blast_notices: tuple[BlastNotice, ...] = ()
    blasts: tuple[Blast, ...] = ()
    trucks: tuple[TruckPassage, ...] = ()
    work: tuple[WorkPeriod, ...] = ()
    temporary_lighting: tuple[TemporaryLighting, ...] = ()
    other_events: tuple[GenericEvent, ...] = ()
    seismic: tuple[SeismicEvent, ...] = ()  # seismograph events (ground vibration, airblast)
    # The site's own recorded blasts as (scaled distance, PPV) for its site law (early warnings
    # only; filled by the daemon from the whole journal, not the window).
    site_law: tuple[SiteLawPoint, ...] = ()
    # Set only by rules.base.only_site once it has dropped other sites' records, so the
    # dozen rules of a profile do not each filter the same data again.
    filtered_for: str = ""
    # ``sound`` by sensor, each in time order: grouped once here, not by every rule that wants it.
    sound_by_sensor: Mapping[str, tuple[SoundLevels, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        groups: dict[str, list[SoundLevels]] = {}
        for r in self.sound:
            groups.setdefault(r.sensor, []).append(r)
        # In time order whatever the caller's: the rules take a minute's slice by bisection.
        by_sensor = {k: tuple(sorted(v, key=_TS)) for k, v in groups.items()}
        object.__setattr__(self, "sound_by_sensor", by_sensor)

    @classmethod
    def grouped(cls, sound_by_sensor: Mapping[str, tuple[SoundLevels, ...]], **fields: Any) -> SiteData:
        """SiteData whose sound the caller already holds per sensor, each in time order.

        ``sound`` then lists the sensors' series one after the other. The daemon files each
        reading by sensor once, as it arrives (monitor/daemon/recent_sound.py): grouping the
        same readings again for every minute that reads them grew the judging with the
        neighbourhood (issue 31).
        """
        data = cls(**fields)
        object.__setattr__(data, "sound", tuple(chain.from_iterable(sound_by_sensor.values())))
        object.__setattr__(data, "sound_by_sensor", dict(sound_by_sensor))
        return data
