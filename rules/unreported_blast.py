"""Blasts nobody recorded (Dovre 6.F: blasting hours and notice can only be checked for
blasts the operator records, so the meters look for blasts that were not).

A second at a boundary meter is taken for a blast when it has the shape of an impulse:

* its peak (the higher of LZpeak and LCpeak) reaches ``peak_threshold_db``;
* the peak stands far above that second's LAeq (crest >= ``min_crest_db``): a detonation is
  a short pressure spike, machinery is a sustained level;
* a few seconds either side (beyond ``settle_s``, which allows for the rumble) the LAeq is
  back within ``neighbor_tolerance_db`` of the background (median LAeq over
  +-``background_window_s``), so it is not a loud activity lasting several seconds;
* no other second in that background window comes within ``isolation_db`` of the peak, so
  it is not a rock breaker hammering away.

If no Blast record lies within +-``report_window_s`` of it: UNREPORTED_BLAST, one finding
per meter (each meter's evidence stands alone; episodes group them per meter).

It is not a VIOLATION and issues no notice: a sound alone does not show that a blast took
place, when, or that notice was missing, which a 6.F notice would have to state. The finding
says so, and the Town asks the operator for the blast record (the standard's required action).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from rules.base import RuleSpec, Standard, is_given, leq, make_finding, only_site, sensor_label, sensors_of
from rules.citation import citation_text
from rules.model import Finding, FindingKind, Measurement, SensorKind, SiteContext, SiteData, SoundLevels
from rules.numbers import within
from rules.times import iso, local_hms

_TS, _LCPEAK, _LZPEAK = attrgetter("ts"), attrgetter("LCpeak"), attrgetter("LZpeak")


@dataclass(frozen=True, slots=True)
class UnreportedBlastParams:
    peak_threshold_db: float = field(default=120.0, metadata=within(minimum=60, maximum=200, unit=" dB"))
    min_crest_db: float = field(default=25.0, metadata=within(minimum=0, maximum=100, unit=" dB"))
    background_window_s: float = field(default=30.0, metadata=within(more_than=0, maximum=3600, unit=" s"))
    settle_s: float = field(default=3.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    neighbor_tolerance_db: float = field(default=6.0, metadata=within(minimum=0, maximum=100, unit=" dB"))
    isolation_db: float = field(default=10.0, metadata=within(minimum=0, maximum=100, unit=" dB"))
    # Seconds of context needed before an impulse is judged
    min_background_s: int = field(default=10, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # Operators' logs are not to the second
    report_window_s: float = field(default=600.0, metadata=within(minimum=0, maximum=86400, unit=" s"))

    def __post_init__(self) -> None:
        if self.settle_s >= self.background_window_s:
            raise ValueError("settle_s: must be shorter than background_window_s")


def _peak(record: SoundLevels) -> float | None:
    """The higher of LZpeak and LCpeak (either may be missing); once per reading per minute judged."""
    z, c = record.LZpeak, record.LCpeak
    if z is None or c is None:
        return c if z is None else z
    return z if z > c else c


def _no_peak_reaches(records: Sequence[SoundLevels], threshold: float) -> bool:
    """No record's LCpeak or LZpeak reaches ``threshold``, so find_impulse refuses every one
    (``_peak`` is the higher of the two). Most minutes are so: one pass in C over the minute,
    not a call per second (issue 31). A NaN peak is not below it: that minute is looked at."""
    below = float(threshold).__gt__  # an int's __gt__ answers NotImplemented (true) for a float
    return all(map(below, filter(is_given, map(_LCPEAK, records)))) and all(
        map(below, filter(is_given, map(_LZPEAK, records)))
    )


@dataclass(frozen=True, slots=True)
class Impulse:
    record: SoundLevels
    peak: float
    crest: float
    background: float
    neighbours: float


def find_impulse(
    record: SoundLevels, series: Sequence[SoundLevels], params: UnreportedBlastParams
) -> Impulse | None:
    """Whether this record is the peak second of an isolated impulse in its sensor's series."""
    peak = _peak(record)
    if peak is None or peak < params.peak_threshold_db:
        return None
    crest = peak - record.LAeq
    if crest < params.min_crest_db:
        return None
    near: list[SoundLevels] = []
    far: list[tuple[float, SoundLevels]] = []
    for other in series:
        offset = abs((other.ts - record.ts).total_seconds())
        if other is record or offset > params.background_window_s:
            continue
        if offset <= params.settle_s:
            near.append(other)
        else:
            far.append((offset, other))
    # The loudest second of the burst speaks for it; ties go to the earliest.
    for other in near:
        other_peak = _peak(other)
        if other_peak is not None and (other_peak > peak or (other_peak == peak and other.ts < record.ts)):
            return None
    if len(far) < params.min_background_s:
        return None
    background = statistics.median(other.LAeq for _, other in far)
    neighbour_records = [other for offset, other in far if offset <= params.settle_s + 2.0]
    neighbours = leq(r.LAeq for r in neighbour_records) if neighbour_records else background
    if neighbours > background + params.neighbor_tolerance_db:
        return None
    for _, other in far:
        other_peak = _peak(other)
        if other_peak is not None and other_peak >= peak - params.isolation_db:
            return None
    return Impulse(record, peak, crest, background, neighbours)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: UnreportedBlastParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    window = timedelta(seconds=params.report_window_s)
    findings: list[Finding] = []
    sound = data.sound_by_sensor
    for sensor_id, info in sensors_of(site, SensorKind.SOUND, boundary_only=True).items():
        series = sound.get(sensor_id, ())
        # The minute's own seconds, by bisection of the time-ordered series: the margins around
        # it are context for find_impulse, not candidates (issue 31).
        first = bisect.bisect_left(series, start, key=_TS)
        own = series[first : bisect.bisect_left(series, end, key=_TS)]
        if _no_peak_reaches(own, params.peak_threshold_db):
            continue
        for record in own:
            impulse = find_impulse(record, series, params)
            if impulse is None:
                continue
            if any(abs(blast.ts - record.ts) <= window for blast in data.blasts):
                continue
            minutes = params.report_window_s / 60
            summary = (
                f"An impulsive sound (peak {impulse.peak:.1f} dB at {local_hms(record.ts, site.tz)} local) "
                f"at {sensor_label(info)} looks like a blast, but no blast was recorded within "
                f"{minutes:g} minutes "
                f"({citation_text(standard.section)}); no notice of violation: a sound alone does not show "
                "a blast or its time, so the Town should ask the Operator for the blast record"
            )
            findings.append(
                make_finding(
                    site,
                    standard,
                    FindingKind.UNREPORTED_BLAST,
                    record.ts,
                    record.end,
                    summary,
                    sensors=(sensor_id,),
                    measurements=(
                        Measurement(
                            "peak (LZpeak/LCpeak)", round(impulse.peak, 2), params.peak_threshold_db, "dB"
                        ),
                        Measurement(
                            "crest (peak - LAeq)", round(impulse.crest, 2), params.min_crest_db, "dB"
                        ),
                        Measurement("background LAeq", round(impulse.background, 2), None, "dB(A)"),
                    ),
                    refs=(f"sound:{sensor_id}:{iso(record.ts)}",),
                    details={
                        "neighbour_laeq_db": round(impulse.neighbours, 2),
                        "report_window_s": params.report_window_s,
                    },
                )
            )
    return findings


def margins(params: UnreportedBlastParams) -> tuple[timedelta, timedelta]:
    return timedelta(seconds=params.background_window_s), timedelta(seconds=params.background_window_s)


RULE: RuleSpec[UnreportedBlastParams] = RuleSpec(
    name="unreported_blast",
    params_type=UnreportedBlastParams,
    evaluate=evaluate,
    margins=margins,
    description="Impulsive boundary peaks with no blast recorded nearby.",
    reads=("sound",),
)
