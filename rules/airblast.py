"""Airblast from blasting measured by a seismograph's linear microphone (Dovre 6.F via SPS 307).

The limit depends on how low in frequency the microphone is flat (30 CFR 816.67(b)(1): 134 dB
peak for a system flat to 0.1 Hz, 133 dB to 2 Hz, 129 dB to 6 Hz): most of a blast's air
overpressure lies below 20 Hz, so an instrument that does not hear it must be held to less.
The profile gives the table (``limits_db``: instrument low-frequency limit in Hz -> peak dB);
the event records its microphone's limit. A microphone flat to no row's frequency (a class 1
sound level meter's Z weighting is flat only down to 10 Hz) gives an INFO finding: an
indication, not a measurement the limit is stated for. Above the limit: VIOLATION.

816.67(b)(1) also states 105 dBC slow response for a C-weighted system. The summary computes
that level from the microphone's waveform (``airblast_dbc_slow``: C weighting, 1 s exponential);
the profile's ``c_slow_limit_db`` names the limit and ``instrument`` when it applies: "c-slow",
the site's airblast is judged as a C-weighted slow instrument reads it; "linear" (the default),
the linear peak by the table, and the C-weighted slow level only for a microphone that qualifies
for no row of it (which would otherwise be the INFO indication above).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.ground_vibration import blast_of
from rules.model import Finding, FindingKind, Measurement, SiteContext, SiteData
from rules.numbers import within
from rules.seismic_limits import airblast_limit
from rules.times import local_hms

DEFAULT_LIMITS_DB: Mapping[str, float] = MappingProxyType({"0.1": 134.0, "2": 133.0, "6": 129.0})
INSTRUMENTS = ("linear", "c-slow")


@dataclass(frozen=True, slots=True)
class AirblastParams:
    # Instrument flat down to (Hz) = peak dB limit
    limits_db: Mapping[str, float] = field(
        default_factory=lambda: DEFAULT_LIMITS_DB, metadata=within(minimum=60, maximum=200, unit=" dB")
    )
    blast_before_s: float = field(default=10.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    blast_after_s: float = field(default=60.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # 30 CFR 816.67(b)(1): 105 dBC slow response for a C-weighted system (None: not judged)
    c_slow_limit_db: float | None = field(default=None, metadata=within(minimum=60, maximum=200, unit=" dB"))
    instrument: str = "linear"  # INSTRUMENTS: which limit applies (module docstring)

    def __post_init__(self) -> None:
        if self.instrument not in INSTRUMENTS:
            raise ValueError(f"instrument: {self.instrument!r} is not one of {', '.join(INSTRUMENTS)}")
        if self.instrument == "c-slow" and self.c_slow_limit_db is None:
            raise ValueError('c_slow_limit_db: instrument = "c-slow" needs the C-weighted slow limit (dB)')
        if not self.limits_db:
            raise ValueError("limits_db: list at least one instrument frequency (Hz) = peak dB")
        for hz in self.limits_db:
            try:
                value = float(hz)
            except ValueError:
                raise ValueError(f"limits_db: {hz!r} is not a frequency in Hz") from None
            if not value > 0:
                raise ValueError(f"limits_db: {hz!r} must be a positive frequency")


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: AirblastParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    findings: list[Finding] = []
    for event in data.seismic:
        if not start <= event.ts < end or event.airblast_db is None:
            continue
        db = event.airblast_db
        row = airblast_limit(params.limits_db, event.mic_low_hz) if params.instrument == "linear" else None
        blast = blast_of(event, data.blasts, params.blast_before_s, params.blast_after_s)
        what = f"blast {blast.id}" if blast is not None else "an event with no blast record"
        low = "unknown" if event.mic_low_hz is None else f"{event.mic_low_hz:g} Hz"
        stamp = local_hms(event.ts, site.tz)
        dbc = event.airblast_dbc_slow
        c_slow = row is None and params.c_slow_limit_db is not None and dbc is not None
        measurement = Measurement("airblast (linear peak)", round(db, 2), None, "dB")
        if c_slow:
            assert dbc is not None and params.c_slow_limit_db is not None
            limit = params.c_slow_limit_db
            kind = FindingKind.VIOLATION if dbc > limit else FindingKind.COMPLIANT
            why = (
                "the profile holds this site's airblast to a C-weighted slow-response instrument"
                if params.instrument == "c-slow"
                else f"the microphone is flat only down to {low}, above every linear row"
            )
            relation = "above" if dbc > limit else "within"
            verdict = (
                f"its C-weighted slow-response level {dbc:.1f} dB(C) is {relation}"
                f" the {limit:g} dB(C) limit for a C-weighted system ({why})"
            )
            measurement = Measurement("airblast (C-weighted slow)", round(dbc, 2), limit, "dB(C)")
        elif row is None:
            kind = FindingKind.INFO
            limit = None
            verdict = (
                "the profile holds this site's airblast to a C-weighted slow-response instrument and"
                " the event carries no C-weighted level (no microphone waveform), so this is an"
                " indication, not a judged measurement"
                if params.instrument == "c-slow"
                else f"the microphone is flat only down to {low}, above every instrument the limits are "
                "stated for, so this is an indication, not a judged measurement"
            )
        else:
            instrument_hz, limit = row
            measurement = Measurement("airblast (linear peak)", round(db, 2), limit, "dB")
            kind = FindingKind.VIOLATION if db > limit else FindingKind.COMPLIANT
            relation = "above" if db > limit else "within"
            verdict = (
                f"{relation} the {limit:g} dB limit for a system flat to {instrument_hz:g} Hz "
                f"(this microphone: {low})"
            )
        if event.mic_clipped and kind != FindingKind.VIOLATION:
            kind = FindingKind.UNRELIABLE
            verdict += "; the microphone channel clipped, so the true peak was higher than recorded"
        summary = (
            f"Airblast from {what} at seismograph {event.sensor} at {stamp} local peaked at "
            f"{event.airblast_pa:.1f} Pa ({db:.1f} dB(L)), {verdict} ({citation_text(standard.section)})"
        )
        findings.append(
            make_finding(
                site,
                standard,
                kind,
                event.ts,
                event.end,
                summary,
                sensors=(event.sensor,),
                measurements=(measurement,),
                refs=(f"seismic:{event.sensor}:{event.id}",) + ((f"blast:{blast.id}",) if blast else ()),
                details={
                    "airblast_pa": event.airblast_pa,
                    "airblast_db": round(db, 2),
                    "airblast_dbc_slow": None if dbc is None else round(dbc, 2),
                    "judged_on": "c-slow" if c_slow else "linear",
                    "mic_low_hz": event.mic_low_hz,
                    "instrument_row_hz": None if row is None else row[0],
                    "event_id": event.id,
                    "blast_id": blast.id if blast else None,
                    "source": event.source,
                },
            )
        )
    return findings


RULE: RuleSpec[AirblastParams] = RuleSpec(
    name="airblast",
    params_type=AirblastParams,
    evaluate=evaluate,
    description="Blast airblast at a seismograph's linear microphone, limited by its low-frequency limit.",
)
