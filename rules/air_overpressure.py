"""Air overpressure from a blast (Dovre 6.F, which requires blasting "strictly in accordance
with Wis. Adm. Code Ch. SPS 307"; SPS 307 limits air blast at the nearest dwelling).

For each blast in the interval the highest of (a) the blast record's own overpressure
and (b) the linear peak (LZpeak) at boundary sound meters within a short window around
the detonation is held against the limit (default 133 dB). Above it: VIOLATION. When
something was measured and it is within the limit, a COMPLIANT finding keeps the
evidence. Nothing measured: no finding.

A boundary sound meter's LZpeak is a secondary indication, and the finding says so: a class 1
meter's Z weighting (IEC 61672-1) is flat only down to 10 Hz, while airblast limits are stated for
instruments flat from 2 Hz or 0.1 Hz (30 CFR 816.67(b)), so the meter under-reads the very energy
the limit is about. The primary measurement is a seismograph's linear microphone at the nearest
structure (rules/airblast.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site, sensors_of
from rules.citation import citation_text
from rules.model import Finding, FindingKind, Measurement, SensorKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_hms

# Said in every finding that holds a boundary meter's LZpeak (one text: the notice, alert and
# report render the finding's summary).
SECONDARY = (
    "; a boundary sound meter's LZpeak is a secondary indication: its Z weighting is flat only down"
    " to 10 Hz and under-reads a blast's air overpressure, which a seismograph's linear microphone"
    " at the nearest structure measures (airblast standard)"
)


@dataclass(frozen=True, slots=True)
class AirOverpressureParams:
    # Linear peak
    limit_db: float = field(default=133.0, metadata=within(minimum=60, maximum=200, unit=" dB"))
    window_before_s: float = field(default=5.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # Sound travels ~340 m/s: a meter 2 km away hears it 6 s later
    window_after_s: float = field(default=10.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    use_sound_meters: bool = True


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: AirOverpressureParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    meters = sensors_of(site, SensorKind.SOUND, boundary_only=True) if params.use_sound_meters else {}
    findings: list[Finding] = []
    for blast in data.blasts:
        if not start <= blast.ts < end:
            continue
        window_start = blast.ts - timedelta(seconds=params.window_before_s)
        window_end = blast.ts + timedelta(seconds=params.window_after_s)
        peaks: list[tuple[float, str, str]] = []  # (dB, where, ref)
        if blast.overpressure_db is not None:
            peaks.append((blast.overpressure_db, "the blast record", f"blast:{blast.id}"))
        for record in data.sound:
            if (
                record.sensor in meters
                and record.LZpeak is not None
                and window_start <= record.ts < window_end
            ):
                peaks.append(
                    (record.LZpeak, f"meter {record.sensor}", f"sound:{record.sensor}:{iso(record.ts)}")
                )
        if not peaks:
            continue
        worst, where, _ = max(peaks)
        over = worst > params.limit_db
        kind = FindingKind.VIOLATION if over else FindingKind.COMPLIANT
        relation = "above" if over else "within"
        sensors = tuple(sorted({ref.split(":")[1] for _, _, ref in peaks if ref.startswith("sound:")}))
        summary = (
            f"Air overpressure from blast {blast.id} at {local_hms(blast.ts, site.tz)} local peaked at "
            f"{worst:.1f} dB ({where}), {relation} the {params.limit_db:g} dB limit "
            f"({citation_text(standard.section)})"
        ) + (SECONDARY if sensors else "")
        findings.append(
            make_finding(
                site,
                standard,
                kind,
                blast.ts,
                blast.ts + timedelta(seconds=1),
                summary,
                sensors=sensors,
                measurements=(
                    Measurement("air overpressure (linear peak)", round(worst, 2), params.limit_db, "dB"),
                ),
                refs=(f"blast:{blast.id}", *sorted({ref for _, _, ref in peaks} - {f"blast:{blast.id}"})),
                details={
                    "peaks": [
                        {
                            "db": db,
                            "source": src,
                            "indication": "secondary" if ref.startswith("sound:") else "record",
                        }
                        for db, src, ref in sorted(peaks, reverse=True)
                    ]
                },
            )
        )
    return findings


def margins(params: AirOverpressureParams) -> tuple[timedelta, timedelta]:
    return timedelta(seconds=params.window_before_s), timedelta(seconds=params.window_after_s)


RULE: RuleSpec[AirOverpressureParams] = RuleSpec(
    name="air_overpressure",
    params_type=AirOverpressureParams,
    evaluate=evaluate,
    margins=margins,
    description="Blast air overpressure (record or boundary LZpeak) against a limit.",
    reads=("sound",),
)
