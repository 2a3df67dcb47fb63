"""Blasting hours (Dovre 6.F).

6.F: blasting "shall occur between the hours of ten o'clock (10:00) am and three o'clock
(3:00) pm; except that blasting may occur after three o'clock (3:00) pm, but prior to
sunset, if required for safety reasons beyond the reasonable control of the Operator."

For each blast detonated in the interval, by the site's local clock on the blast's date:

* window_start <= time <= window_end (both inclusive, to the second): COMPLIANT, kept as evidence.
* before window_start: VIOLATION.
* after window_end and before sunset: SAFETY_EXCEPTION if a safety reason was recorded
  (the town is told), else VIOLATION.
* at or after sunset: VIOLATION, safety reason or not.

The sunset limit bounds only the after-hours exception; a blast inside the stated hours
is compliant even where the sun has set earlier (the ordinance states the hours plainly).

Which sunset: the first sunset after window_end (15:00) local on the blast's day, wherever
it falls (``sun.sunset_after``). Where summer sunset comes after local midnight (Fairbanks,
21 June: 00:46 on the 22nd) a 16:00 safety blast is before sunset. With
``safety_exception_past_midnight`` (default on) a blast after midnight but before that
sunset (00:30 on the 22nd) is judged as part of the 21st's exception rather than as a blast
before 10:00; the Town should confirm this reading.

Polar cases (no sunset between window_end and the next day's window_start):
* polar day, "sun does not set": every moment of that local date is "prior to sunset",
  so the safety exception runs to local midnight; after that the next day's 10:00 rule applies.
* polar night, "sun does not rise", or the sun already down at window_end: there is no
  daylight to blast "prior to", so the after-hours exception is unavailable and a late
  blast is a VIOLATION.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from rules import sun
from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.model import Blast, BlastNotice, Finding, FindingKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, parse_clock


@dataclass(frozen=True, slots=True)
class BlastWindowParams:
    window_start: str = "10:00:00"  # local, inclusive
    window_end: str = "15:00:00"  # local, inclusive
    safety_exception_until_sunset: bool = True  # 6.F: after window_end, before sunset, for safety
    # A sunset after local midnight still bounds the previous afternoon's exception (high latitudes).
    safety_exception_past_midnight: bool = True
    # Early warning lead for the window end and for sunset
    warn_before_close_min: float = field(default=30.0, metadata=within(minimum=0, maximum=1440, unit=" min"))

    def __post_init__(self) -> None:
        for name in ("window_start", "window_end"):
            try:
                parse_clock(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        if parse_clock(self.window_start) >= parse_clock(self.window_end):
            raise ValueError("window_end: must be later than window_start")

    @property
    def opens(self) -> time:
        return parse_clock(self.window_start)

    @property
    def closes(self) -> time:
        return parse_clock(self.window_end)


def _clock(t: time) -> str:
    return t.strftime("%H:%M") if t.second == 0 else t.strftime("%H:%M:%S")


# What people type in a required field when they have nothing to say (case ignored).
_NO_REASON = frozenset({"none", "n/a", "na", "nil", "null", "no", "tbd", "unknown", "no reason"})


def recorded_reason(text: str | None) -> str | None:
    """The safety reason as recorded, or None for a blank, a placeholder ("n/a", "none") or
    punctuation only: the after-hours exception needs a reason someone can review."""
    reason = " ".join((text or "").split())
    if not any(c.isalnum() for c in reason) or reason.casefold().rstrip(".") in _NO_REASON:
        return None
    return reason


def clock_text(local: datetime) -> str:
    """'15:00:00', or '15:00:00.5' when a fraction of a second decides which side of 15:00 it is."""
    shown = local.strftime("%H:%M:%S")
    if local.microsecond:
        shown += f".{local.microsecond:06d}".rstrip("0")
    return shown


def evening_sunset(site: SiteContext, params: BlastWindowParams, local_date: date) -> sun.Sunset:
    """The sunset that ends the after-hours exception of ``local_date`` (see the module text)."""
    return sun.sunset_after(site, local_date, params.closes, params.opens)


def _sun_details(sunset: sun.Sunset) -> dict[str, str]:
    return {
        "sun": sunset.explanation,
        "sun_case": sunset.case,
        "sunset_local": sunset.at.isoformat() if sunset.at else "",
    }


def judge_blast(
    site: SiteContext, params: BlastWindowParams, blast: Blast
) -> tuple[FindingKind, str, dict[str, str]]:
    """Classify one blast; returns the kind, the clause that decided it, and details."""
    tz = site.tz
    local = blast.ts.astimezone(tz)
    clock = local.timetz().replace(tzinfo=None)
    opens, closes = _clock(params.opens), _clock(params.closes)
    has_reason = recorded_reason(blast.safety_reason) is not None
    if clock < params.opens:
        day_before = local.date() - timedelta(days=1)
        previous = evening_sunset(site, params, day_before)
        if (
            params.safety_exception_until_sunset
            and params.safety_exception_past_midnight
            and previous.at is not None
            and previous.at.date() == local.date()
            and local < previous.at
        ):
            # Still the previous afternoon's exception: that evening's sunset is after midnight.
            details = {"local_time": local.isoformat(), "exception_day": day_before.isoformat()}
            details |= _sun_details(previous)
            return _after_hours(previous, closes, has_reason, blast, details, day_before)
        # Past midnight, the sunset that matters is the one that has just passed.
        shown = previous if previous.at is not None and previous.at.date() == local.date() else None
        details = {
            "local_time": local.isoformat(),
            **_sun_details(shown or evening_sunset(site, params, local.date())),
        }
        return FindingKind.VIOLATION, f"before {opens}, when blasting is not allowed", details
    sunset = evening_sunset(site, params, local.date())
    details = {"local_time": local.isoformat(), **_sun_details(sunset)}
    if clock <= params.closes:
        return FindingKind.COMPLIANT, f"within the allowed hours {opens}-{closes}", details
    if not params.safety_exception_until_sunset:
        return FindingKind.VIOLATION, f"after {closes}, when blasting is not allowed", details
    details["exception_day"] = local.date().isoformat()
    return _after_hours(sunset, closes, has_reason, blast, details, local.date())


def _after_hours(
    sunset: sun.Sunset,
    closes: str,
    has_reason: bool,
    blast: Blast,
    details: dict[str, str],
    day: date,
) -> tuple[FindingKind, str, dict[str, str]]:
    local = datetime.fromisoformat(details["local_time"])
    after = f"after {closes}" if local.date() == day else f"after {closes} on {day.isoformat()}"
    if sunset.case == sun.POLAR_NIGHT:
        return (
            FindingKind.VIOLATION,
            f"{after} on a day the {sunset.explanation}, so there is no daylight for a safety exception",
            details,
        )
    if sunset.at is not None and local >= sunset.at:
        return FindingKind.VIOLATION, f"{after} and at or after {sunset.explanation}", details
    before = (
        "before midnight on a day the " + sunset.explanation
        if sunset.at is None
        else f"before {sunset.explanation}"
    )
    if has_reason:
        return (
            FindingKind.SAFETY_EXCEPTION,
            f"{after} but {before}, for a recorded safety reason ({blast.safety_reason!s})",
            details,
        )
    given = " ".join((blast.safety_reason or "").split())
    if given:  # a placeholder: say what was recorded, and that it is no reason
        return (
            FindingKind.VIOLATION,
            f"{after} ({before}) without a safety reason ({given!r} gives none)",
            details,
        )
    return FindingKind.VIOLATION, f"{after} ({before}) without a recorded safety reason", details


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: BlastWindowParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    findings: list[Finding] = []
    for blast in data.blasts:
        if not start <= blast.ts < end:
            continue
        kind, reason, details = judge_blast(site, params, blast)
        local = blast.ts.astimezone(site.tz)
        summary = (
            f"Blast {blast.id} went off at {clock_text(local)} local on {local.date().isoformat()}, "
            f"{reason} ({citation_text(standard.section)})"
        )
        findings.append(
            make_finding(
                site,
                standard,
                kind,
                blast.ts,
                blast.ts + timedelta(seconds=1),
                summary,
                exemptions=(f"safety reason: {blast.safety_reason}",) if blast.safety_reason else (),
                refs=(f"blast:{blast.id}",),
                details={**details, "safety_reason": blast.safety_reason or ""},
            )
        )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: BlastWindowParams, data: SiteData, now: datetime
) -> list[Finding]:
    """Warn about announced blasts that have not gone off yet and whose time is running out.

    One warning per notice (its id keys on the planned time), so repeated calls update it.
    """
    data = only_site(data, site.id)
    tz = site.tz
    lead = timedelta(minutes=params.warn_before_close_min)
    # As of ``now``: a blast recorded for a later time has not gone off yet (the daemon's data
    # clock may hold data ahead of the time it works at).
    done = {blast.id for blast in data.blasts if blast.ts <= now}
    warnings: list[Finding] = []
    for notice in data.blast_notices:
        if notice.id in done:
            continue
        local_now = now.astimezone(tz)
        planned_local = notice.planned_ts.astimezone(tz)
        if planned_local.date() != local_now.date():
            continue
        opens = datetime.combine(local_now.date(), params.opens, tz)
        closes = datetime.combine(local_now.date(), params.closes, tz)
        sunset = evening_sunset(site, params, local_now.date())
        message = _warning_for(notice, planned_local, local_now, opens, closes, sunset, lead, params)
        if message is None:
            continue
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                notice.planned_ts,
                notice.planned_ts + timedelta(seconds=1),
                f"{message} ({citation_text(standard.section)})",
                refs=(f"notice:{notice.id}",),
                details={
                    "as_of": iso(now),
                    "sun": sunset.explanation,
                    "planned_local": planned_local.isoformat(),
                },
            )
        )
    return warnings


def _warning_for(
    notice: BlastNotice,
    planned_local: datetime,
    local_now: datetime,
    opens: datetime,
    closes: datetime,
    sunset: sun.Sunset,
    lead: timedelta,
    params: BlastWindowParams,
) -> str | None:
    name = f"Blast {notice.id}"
    hours = f"{_clock(params.opens)}-{_clock(params.closes)}"
    if local_now <= closes:
        if planned_local < opens:
            return f"{name} is planned for {planned_local:%H:%M}, before blasting hours ({hours}) open"
        if planned_local > closes:
            return (
                f"{name} is planned for {planned_local:%H:%M}, after blasting hours ({hours}); "
                f"it is allowed only for a safety reason and only before sunset ({sunset.explanation})"
            )
        if closes - local_now <= lead:
            left = int((closes - local_now).total_seconds() // 60)
            return (
                f"{name} has not gone off and the blasting window closes at {closes:%H:%M}, in {left} minutes"
            )
        return None
    if not params.safety_exception_until_sunset or sunset.case == sun.POLAR_NIGHT:
        return (
            f"{name} has not gone off and blasting hours ended at {closes:%H:%M}; it may not be fired today"
        )
    if sunset.at is not None and local_now < sunset.at and sunset.at - local_now <= lead:
        left = int((sunset.at - local_now).total_seconds() // 60)
        return (
            f"{name} has not gone off; after {closes:%H:%M} it is allowed only for a safety reason, "
            f"and sunset is at {sunset.at:%H:%M}, in {left} minutes"
        )
    return None


RULE: RuleSpec[BlastWindowParams] = RuleSpec(
    name="blast_window",
    params_type=BlastWindowParams,
    evaluate=evaluate,
    early_warnings=early_warnings,
    description="Blasting only within local hours; after hours only for safety before sunset.",
    verdict_on="blast",  # refs=("blast:<id>",): the blast judged by its own time (6.F)
)
