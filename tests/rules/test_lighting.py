"""Lighting at night (6.C): trespass, flashing, high intensity, upward light, temporary lighting days."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import date, datetime, timedelta

import numpy as np
import pytest

from rules import early_warnings, evaluate_site
from rules.model import (
    Finding,
    FindingKind,
    GenericEvent,
    LightSummary,
    Placement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
    TemporaryLighting,
    TruckPassage,
    WorkKind,
    WorkPeriod,
)
from rules.profile import Profile, ProfileError, load_profile
from rules.times import iso
from tests.support.paths import DATA
from tests.support.rule_builders import (
    DOVRE,
    SITE,
    TROMSO,
    at,
    kinds,
    light,
    make_site,
    run,
    temporary,
    with_overrides,
)

NIGHT = at("2026-06-15 23:00")  # civil dusk 21:36 CDT, dawn 04:40 CDT
NOON = at("2026-06-15 12:00")
MINUTE = timedelta(minutes=1)
case = pytest.param


def trespass(
    readings: list[LightSummary],
    evaluate_at: datetime = NIGHT,
    temporaries: Sequence[TemporaryLighting] = (),
    site: SiteContext = SITE,
) -> list[Finding]:
    data = SiteData(light=tuple(readings), temporary_lighting=tuple(temporaries))
    return run("light_trespass", data, evaluate_at, evaluate_at + MINUTE, site=site)


DARK_THEN_2_LUX_11_MIN = light("l1", NIGHT - 11 * MINUTE, 1, 0.2) + light("l1", NIGHT - 10 * MINUTE, 11, 2.0)

# fmt: off
LIGHT_TRESPASS_CASES = [
    case(DARK_THEN_2_LUX_11_MIN, ["violation"], id="6.C.2-2-lux-for-11-minutes"),
    case(light("l1", NIGHT - 2 * MINUTE, 3, 2.0), [], id="6.C.2-2-lux-for-3-minutes-not-sustained"),
    case(light("l1", NIGHT - 10 * MINUTE, 11, 0.8), [], id="6.C.2-below-1-lux"),
    case(light("l2", NIGHT - 10 * MINUTE, 11, 5.0), [], id="6.C.2-site-sensor-not-boundary"),
]
# fmt: on


@pytest.mark.parametrize(("readings", "expected"), LIGHT_TRESPASS_CASES)
def test_light_trespass(readings: list[LightSummary], expected: list[str]) -> None:
    findings = trespass(readings)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "6.C.2" and finding.sensors == ("l1",)
        assert "above the 1 lux limit over 22:50-23:01 CDT (11 minutes)" in finding.summary


def test_light_trespass_in_daylight_is_not_judged() -> None:
    assert trespass(light("l1", NOON - 10 * MINUTE, 11, 2.0), evaluate_at=NOON) == []


def test_light_trespass_during_declared_temporary_lighting_is_exempt() -> None:
    period = temporary(NIGHT - timedelta(hours=1), 3, "tl-1")
    [finding] = trespass(light("l1", NIGHT - 10 * MINUTE, 11, 2.0), temporaries=[period])
    assert finding.kind == FindingKind.EXEMPT_EXCEEDANCE
    assert finding.exemptions == ("declared temporary lighting tl-1",)


TONIGHT = temporary(NIGHT - timedelta(hours=1), 3, "tl-tonight")
OF_45 = with_overrides(temporary_lighting__max_days_per_year=45)
X_ = "exempt_exceedance"

# 6.C.6 allows temporary lighting on 30 days a year: tonight's declared lighting exempts the
# boundary light on day 30, not on day 31 (the temporary_lighting rule reports that day itself).
# fmt: off
TEMPORARY_ALLOWANCE_CASES = [
    case(29, DOVRE, "light_trespass", [X_], id="6.C.2-temporary-lighting-on-day-30-exempts"),
    case(30, DOVRE, "light_trespass", ["violation"], id="6.C.2-temporary-lighting-on-day-31-does-not"),
    case(30, OF_45, "light_trespass", [X_], id="6.C.2-the-allowance-is-the-temporary-lighting-standards"),
    case(29, DOVRE, "high_intensity_light", [X_], id="6.C.4-temporary-lighting-on-day-30-exempts"),
    case(30, DOVRE, "high_intensity_light", ["violation"], id="6.C.4-temporary-lighting-on-day-31-does-not"),
]
# fmt: on


@pytest.mark.parametrize(("days_before", "profile", "standard", "expected"), TEMPORARY_ALLOWANCE_CASES)
def test_temporary_lighting_exempts_only_within_the_years_days(
    days_before: int, profile: Profile, standard: str, expected: list[str]
) -> None:
    readings = light("l1", NIGHT - 10 * MINUTE, 11, 2.0, lux_max=300.0)
    periods = (*lit_days("2026-05-01", days_before), TONIGHT)
    data = SiteData(light=tuple(readings), temporary_lighting=periods)
    [finding] = run(standard, data, NIGHT, NIGHT + MINUTE, profile=profile)
    assert kinds([finding]) == expected
    allowance = profile.params("temporary_lighting").max_days_per_year
    assert any(f"only on the year's first {allowance} days" in c for c in finding.details["considered"])
    if finding.kind == FindingKind.VIOLATION:
        assert finding.exemptions == ()
        assert "declared temporary lighting was on (tl-tonight on day 31 of 2026), beyond the 30 days" in (
            finding.summary
        )
    else:
        assert finding.exemptions == ("declared temporary lighting tl-tonight",)
        assert "beyond" not in finding.summary


def test_temporary_lighting_exemption_counts_the_night_as_6_c_6_does() -> None:
    """Day 30 is one night switched off for a minute at midnight: after midnight is still day 30."""
    after_midnight = at("2026-06-16 01:00")
    periods = (
        *lit_days("2026-05-01", 29),
        TemporaryLighting("pit1", "a", at("2026-06-15 20:00"), at("2026-06-15 23:59")),
        TemporaryLighting("pit1", "b", at("2026-06-16 00:00"), at("2026-06-16 04:00")),
    )
    data = SiteData(
        light=tuple(light("l1", after_midnight - 10 * MINUTE, 11, 2.0)), temporary_lighting=periods
    )
    [finding] = run("light_trespass", data, after_midnight, after_midnight + MINUTE)
    assert finding.kind == FindingKind.EXEMPT_EXCEEDANCE
    assert finding.exemptions == ("declared temporary lighting b",)
    assert run("temporary_lighting", data, at("2026-05-01 00:00"), after_midnight) == []


def test_temporary_days_are_not_set_per_lighting_standard() -> None:
    with pytest.raises(ProfileError, match=r"light_trespass\.temporary_days: not set here; it follows the"):
        with_overrides(light_trespass__temporary_days=45)


def test_no_civil_night_in_tromso_in_june_and_whole_night_in_december() -> None:
    june = at("2026-06-15 01:00", "Europe/Oslo")
    assert trespass(light("l1", june - 10 * MINUTE, 11, 2.0, site="tromso"), june, site=TROMSO) == []
    december = at("2026-12-15 20:00", "Europe/Oslo")
    findings = trespass(light("l1", december - 10 * MINUTE, 11, 2.0, site="tromso"), december, site=TROMSO)
    assert kinds(findings) == ["violation"]


RATE = 10.0


def square_wave(hz: float, seconds: float, high: float = 20.0, low: float = 0.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return np.where((t * hz) % 1.0 < 0.5, high, low)


def flashing_minutes(count: int, hz: float = 1.0, start: datetime = NIGHT - 9 * MINUTE) -> list[LightSummary]:
    burst = tuple(float(v) for v in square_wave(hz, 60))
    return light("l2", start, count, 10.0, lux_max=20.0, burst=lambda i: burst, rate=RATE)


def beacon_minute(at_time: datetime = NIGHT) -> list[LightSummary]:
    # A vehicle's amber beacon sweeps past for 20 s inside an otherwise dark minute.
    samples = np.zeros(600)
    samples[200:400] = square_wave(1.5, 20)
    return light(
        "l2", at_time, 1, 1.0, lux_max=20.0, burst=lambda i: tuple(float(v) for v in samples), rate=RATE
    )


def steady_minutes(count: int) -> list[LightSummary]:
    rng = np.random.default_rng(7)
    burst = tuple(float(v) for v in 15.0 + rng.normal(0, 0.2, 600))
    return light("l2", NIGHT - 9 * MINUTE, count, 15.0, burst=lambda i: burst, rate=RATE)


# fmt: off
FLASHING_LIGHT_CASES = [
    case(flashing_minutes(10), ["violation"], id="6.C.3-1-Hz-for-10-minutes"),
    case(flashing_minutes(10, hz=0.2), ["violation"], id="6.C.3-0.2-Hz-revolving-beacon"),
    case(beacon_minute(), [], id="6.C.3-20-second-vehicle-beacon-exempt"),
    case(steady_minutes(10), [], id="6.C.3-steady-light"),
    case(flashing_minutes(10, hz=0.05), [], id="6.C.3-0.05-Hz-slower-than-band"),
]
# fmt: on


@pytest.mark.parametrize(("readings", "expected"), FLASHING_LIGHT_CASES)
def test_flashing_light(readings: list[LightSummary], expected: list[str]) -> None:
    findings = run("flashing_light", SiteData(light=tuple(readings)), NIGHT, NIGHT + MINUTE)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "6.C.3"


def test_flashing_frequency_is_measured() -> None:
    [finding] = run("flashing_light", SiteData(light=tuple(flashing_minutes(10))), NIGHT, NIGHT + MINUTE)
    assert finding.measurements[0].name == "flash frequency"
    assert finding.measurements[0].value == pytest.approx(1.0, abs=0.05)
    assert "from before 22:51 to 23:01;" in finding.summary


def test_flashing_in_daylight_is_not_judged() -> None:
    readings = flashing_minutes(10, start=NOON - 9 * MINUTE)
    assert run("flashing_light", SiteData(light=tuple(readings)), NOON, NOON + MINUTE) == []


# fmt: off
HIGH_INTENSITY_CASES = [
    case(300.0, NIGHT, ["violation"], id="6.C.4-search-light-at-night"),
    case(10.0, NIGHT, [], id="6.C.4-ordinary-light"),
    case(300.0, NOON, [], id="6.C.4-daylight-not-judged"),
]
# fmt: on


@pytest.mark.parametrize(("lux_max", "when", "expected"), HIGH_INTENSITY_CASES)
def test_high_intensity(lux_max: float, when: datetime, expected: list[str]) -> None:
    data = SiteData(light=tuple(light("l1", when, 1, 0.5, lux_max=lux_max)))
    findings = run("high_intensity_light", data, when, when + MINUTE)
    assert kinds(findings) == expected
    assert all(f.section == "6.C.4" for f in findings)


# max_lux 25: one lux either side; beam signature: peak 10x the minute's mean (26 lux over 2.6 mean).
# fmt: off
HIGH_INTENSITY_WORDING_CASES = [
    case(24.0, 0.5, [], None, id="6.C.4-24-lux-below"),
    case(25.0, 0.5, [], None, id="6.C.4-25-lux-at-the-limit"),
    case(26.0, 0.5, ["violation"], "matched", id="6.C.4-26-lux-brief-sweep-matches-beam"),
    case(26.0, 2.6, ["violation"], "matched", id="6.C.4-peak-exactly-10x-mean-matches"),
    case(26.0, 2.7, ["violation"], "not matched", id="6.C.4-peak-9.6x-mean-steady-flood-not-a-beam"),
    case(26.0, 26.0, ["violation"], "not matched", id="6.C.4-steady-26-lux"),
]
# fmt: on


@pytest.mark.parametrize(("lux_max", "lux_mean", "expected", "beam"), HIGH_INTENSITY_WORDING_CASES)
def test_high_intensity_finding_describes_what_was_measured(
    lux_max: float, lux_mean: float, expected: list[str], beam: str | None
) -> None:
    data = SiteData(light=tuple(light("l1", NIGHT, 1, lux_mean, lux_max=lux_max)))
    findings = run("high_intensity_light", data, NIGHT, NIGHT + MINUTE)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.summary.startswith(f"Peak illuminance of {lux_max:.1f} lux was measured at boundary")
        assert finding.measurements[0].name == "peak illuminance at the boundary"
        assert finding.details["beam_signature"] == beam
        assert ("as a sweeping search light is" in finding.summary) is (beam == "matched")


def test_high_intensity_never_names_a_search_light_without_a_beam_signature() -> None:
    profile = with_overrides(high_intensity_light__beam_peak_to_mean=0.0)
    data = SiteData(light=tuple(light("l1", NIGHT, 1, 0.5, lux_max=300.0)))
    [finding] = run("high_intensity_light", data, NIGHT, NIGHT + MINUTE, profile=profile)
    assert finding.details["beam_signature"] == "not matched"
    assert "as a sweeping search light is" not in finding.summary


GATE_ROAD = dataclasses.replace(
    SITE,
    sensors={
        **SITE.sensors,
        "l1": SensorInfo("l1", SensorKind.LIGHT, Placement.BOUNDARY, "gate road", ("north",)),
    },
    gate_names={"north": "North gate"},
)
HEADLIGHTS = light("l1", NIGHT, 1, 3.0, lux_max=40.0)  # 40 lux for a moment: 13x the mean, a "beam"


def truck_out(gate: str = "north", ts: datetime = NIGHT + timedelta(seconds=5)) -> TruckPassage:
    return TruckPassage("pit1", "tp-9", ts, gate, "out", "T-17")


def vehicle_at(**fields: object) -> GenericEvent:
    return GenericEvent("pit1", "vp-9", "vehicle-present", NIGHT, {"end": iso(NIGHT + MINUTE), **fields})


# 6.C governs "fixed light sources": a vehicle's headlights at a gate-road sensor are the
# vehicle's, read from the same records as 6.C.3's beacons (rules.lighting.vehicle_records).
# fmt: off
HIGH_INTENSITY_VEHICLE_CASES = [
    case(SiteData(), ["violation"], id="6.C.4-no-record-bright-light-is-a-violation"),
    case(SiteData(trucks=(truck_out(),)), ["exempt_exceedance"], id="6.C.4-haul-truck-at-the-gate"),
    case(SiteData(trucks=(truck_out("south"),)), ["violation"], id="6.C.4-truck-at-another-gate"),
    case(SiteData(trucks=(truck_out(ts=NIGHT + timedelta(seconds=360)),)), ["violation"],
         id="6.C.4-truck-6-minutes-later-is-not-this-light"),
    case(SiteData(other_events=(vehicle_at(gate="north"),)), ["exempt_exceedance"],
         id="6.C.4-vehicle-present-at-the-gate"),
    case(SiteData(other_events=(vehicle_at(sensors=["l2"]),)), ["violation"], id="6.C.4-vehicle-elsewhere"),
]
# fmt: on


@pytest.mark.parametrize(("records", "expected"), HIGH_INTENSITY_VEHICLE_CASES)
def test_high_intensity_vehicle_lights_are_told_by_the_record(records: SiteData, expected: list[str]) -> None:
    data = dataclasses.replace(records, light=tuple(HEADLIGHTS))
    findings = run("high_intensity_light", data, NIGHT, NIGHT + MINUTE, site=GATE_ROAD)
    assert kinds(findings) == expected
    [finding] = findings
    assert finding.details["beam_signature"] == "matched"
    if finding.kind == FindingKind.VIOLATION:
        assert finding.exemptions == () and "as a sweeping search light is" in finding.summary
    else:
        assert finding.details["decided_by"] == "vehicle_record"
        assert "as a sweeping search light is" not in finding.summary
        assert "it is taken for the vehicle's lights" in finding.summary
        assert finding.exemptions[0].startswith(("haul truck T-17 at the North gate", "vehicle present at"))
        assert any(r.startswith(("truck:", "vehicle-present:")) for r in finding.refs)


def test_high_intensity_says_the_threshold_is_the_profiles_not_the_ordinances() -> None:
    [finding] = run("high_intensity_light", SiteData(light=tuple(HEADLIGHTS)), NIGHT, NIGHT + MINUTE)
    assert "above 25 lux, this profile's threshold for a high-intensity light at night" in finding.summary
    assert "(the ordinance sets no figure)" in finding.summary
    assert "allowed" not in finding.summary


def sky_history(level: float = 0.02) -> list[LightSummary]:
    return light("s1", NIGHT - timedelta(hours=72), 72 * 6, level, step_s=600.0)


# fmt: off
UPWARD_LIGHT_CASES = [
    case(0.5, sky_history(), ["violation"], id="6.C.5-sky-25x-baseline"),
    case(0.05, sky_history(), [], id="6.C.5-within-factor"),
    case(0.5, sky_history()[-10:], [], id="6.C.5-too-little-history"),
]
# fmt: on


@pytest.mark.parametrize(("now_lux", "history", "expected"), UPWARD_LIGHT_CASES)
def test_upward_light(now_lux: float, history: list[LightSummary], expected: list[str]) -> None:
    readings = [*history, *light("s1", NIGHT, 1, now_lux)]
    findings = run("upward_light", SiteData(light=tuple(readings)), NIGHT, NIGHT + MINUTE)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "6.C.5" and finding.measurements[1].value == pytest.approx(0.02)


def lit_days(
    first_local_day: str, count: int, prefix: str = "tl", hours: float = 3.0
) -> list[TemporaryLighting]:
    first = date.fromisoformat(first_local_day)
    return [temporary(at(f"{first + timedelta(days=i)} 20:00"), hours, f"{prefix}{i}") for i in range(count)]


YEAR_END = at("2025-12-31 20:00")  # 20:00-04:00: one overnight use, a day of 2025 only


# fmt: off
TEMPORARY_LIGHTING_ACROSS_YEAR_BOUNDARY_CASES = [
    case(29, [], id="6.C.6-30th-day-on-31-December-allowed"),
    case(30, ["2025-12-31"], id="6.C.6-31st-day-on-31-December-violation"),
]
# fmt: on


@pytest.mark.parametrize(
    ("days_before", "expected_violation_dates"), TEMPORARY_LIGHTING_ACROSS_YEAR_BOUNDARY_CASES
)
def test_temporary_lighting_across_year_boundary(
    days_before: int, expected_violation_dates: list[str]
) -> None:
    periods = [*lit_days("2025-12-01", days_before), temporary(YEAR_END, 8, "new-year")]
    data = SiteData(temporary_lighting=tuple(periods))
    start, end = at("2025-11-01 00:00"), at("2026-01-02 00:00")
    findings = run("temporary_lighting", data, start, end, now=end)
    assert [f.details["local_date"] for f in findings] == expected_violation_dates
    assert all(f.kind == FindingKind.VIOLATION and f.section == "6.C.6" for f in findings)
    # The early hours of 1 January are the first day of 2026, not the 32nd of 2025.
    january = run("temporary_lighting", data, at("2026-01-01 00:00"), at("2026-01-02 00:00"), now=end)
    assert january == []


CALENDAR_DATES = with_overrides(temporary_lighting__overnight_counts_as_one_day=False)
DAY = timedelta(hours=24)

# Overnight uses, 20:00 to 04:00 from 1 March: one use is one day (the date it began) by default;
# counting calendar dates, 30 such uses touch 31 dates (the last ends at 04:00 on 31 March).
# fmt: off
TEMPORARY_LIGHTING_OVERNIGHT_CASES = [
    case(30, 8, DOVRE, [], id="6.C.6-30-overnight-uses-are-30-days"),
    case(31, 8, DOVRE, ["2026-03-31"], id="6.C.6-31st-overnight-use-is-day-31"),
    case(30, 8, CALENDAR_DATES, ["2026-03-31"], id="6.C.6-calendar-reading-30-uses-touch-31-dates"),
    case(29, 8, CALENDAR_DATES, [], id="6.C.6-calendar-reading-29-uses-touch-30-dates"),
]
# fmt: on


@pytest.mark.parametrize(("uses", "hours", "profile", "violation_dates"), TEMPORARY_LIGHTING_OVERNIGHT_CASES)
def test_temporary_lighting_overnight_use_is_one_day(
    uses: int, hours: float, profile: Profile, violation_dates: list[str]
) -> None:
    data = SiteData(temporary_lighting=tuple(lit_days("2026-03-01", uses, hours=hours)))
    start, end = at("2026-03-01 00:00"), at("2026-04-02 00:00")
    findings = run("temporary_lighting", data, start, end, now=end, profile=profile)
    assert [f.details["local_date"] for f in findings] == violation_dates
    for finding in findings:
        assert finding.measurements[0].value == 31 and "day 31 of 2026" in finding.summary


# fmt: off
TEMPORARY_LIGHTING_LONG_USE_CASES = [
    case(DAY, [], id="6.C.6-a-24-hour-use-is-one-day"),
    case(DAY + timedelta(seconds=1), ["2026-03-31"], id="6.C.6-24-hours-and-a-second-is-two-days"),
]
# fmt: on


@pytest.mark.parametrize(("length", "violation_dates"), TEMPORARY_LIGHTING_LONG_USE_CASES)
def test_temporary_lighting_long_use_counts_per_24_hours(
    length: timedelta, violation_dates: list[str]
) -> None:
    # 29 evening uses (1-29 March), then one use from 20:00 on 30 March.
    last = TemporaryLighting("pit1", "long", at("2026-03-30 20:00"), at("2026-03-30 20:00") + length)
    data = SiteData(temporary_lighting=(*lit_days("2026-03-01", 29), last))
    start, end = at("2026-03-01 00:00"), at("2026-04-02 00:00")
    findings = run("temporary_lighting", data, start, end, now=end)
    assert [f.details["local_date"] for f in findings] == violation_dates


def night_30(*uses: tuple[str, str, str]) -> list[TemporaryLighting]:
    """Declared periods on the night of 30 March, (id, local start, local end), after 29 evening uses."""
    return [*lit_days("2026-03-01", 29), *(TemporaryLighting("pit1", i, at(a), at(b)) for i, a, b in uses)]


def off_at(clock: str) -> tuple[str, str, str]:
    return ("a", "2026-03-30 20:00", f"2026-03-30 {clock}")


def on_again_at(clock: str) -> tuple[str, str, str]:
    return ("b", f"2026-03-31 {clock}", "2026-03-31 04:00")


TOWER_1 = ("tower1", "2026-03-30 20:00", "2026-03-31 04:00")
TOWER_2 = ("tower2", "2026-03-31 00:30", "2026-03-31 03:00")
NO_JOINING = with_overrides(temporary_lighting__same_use_gap_s=0.0)

# Day 30 is the night of 30 March; a second declared period that night is the same use when it
# overlaps or follows within same_use_gap_s (1 h), whichever fixture it is, and no 31st day.
# fmt: off
TEMPORARY_LIGHTING_SAME_USE_CASES = [
    case([TOWER_1, TOWER_2], DOVRE, [], id="6.C.6-two-fixtures-one-night-are-one-day"),
    case([off_at("23:59"), on_again_at("00:00")], DOVRE, [], id="6.C.6-off-a-minute-at-midnight-is-one-day"),
    case([off_at("23:00"), on_again_at("00:00")], DOVRE, [], id="6.C.6-off-exactly-the-gap-is-one-day"),
    case([off_at("23:00"), on_again_at("00:01")], DOVRE, ["2026-03-31"],
         id="6.C.6-off-longer-than-the-gap-after-midnight-is-a-new-day"),
    case([off_at("23:59"), on_again_at("00:00")], NO_JOINING, ["2026-03-31"],
         id="6.C.6-no-gap-off-a-minute-is-a-new-day"),
    case([TOWER_1, TOWER_2], NO_JOINING, [], id="6.C.6-no-gap-overlapping-fixtures-are-still-one-use"),
]
# fmt: on


@pytest.mark.parametrize(("uses", "profile", "violation_dates"), TEMPORARY_LIGHTING_SAME_USE_CASES)
def test_temporary_lighting_one_use_across_fixtures_and_short_breaks(
    uses: list[tuple[str, str, str]], profile: Profile, violation_dates: list[str]
) -> None:
    data = SiteData(temporary_lighting=tuple(night_30(*uses)))
    start, end = at("2026-03-01 00:00"), at("2026-04-02 00:00")
    findings = run("temporary_lighting", data, start, end, now=end, profile=profile)
    assert [f.details["local_date"] for f in findings] == violation_dates
    for finding in findings:
        assert finding.refs == ("temporary_lighting:b",)
        assert any("is one use" in c for c in finding.details["considered"])


def test_temporary_lighting_day_after_a_shared_night_is_day_31() -> None:
    periods = [*night_30(TOWER_1, TOWER_2), temporary(at("2026-04-01 20:00"), 3, "x")]
    start, end = at("2026-03-01 00:00"), at("2026-04-02 00:00")
    [finding] = run("temporary_lighting", SiteData(temporary_lighting=tuple(periods)), start, end, now=end)
    assert finding.details["local_date"] == "2026-04-01" and finding.measurements[0].value == 31
    assert finding.details["considered"][-1].startswith(
        "Declared temporary lighting of any fixtures that overlaps or follows within 1 hour is one use"
    )


def test_temporary_lighting_31st_day_found_once_in_its_own_minute() -> None:
    periods = lit_days("2026-03-01", 31)
    data = SiteData(temporary_lighting=tuple(periods))
    day31 = at("2026-03-31 20:00")
    assert kinds(run("temporary_lighting", data, day31, day31 + MINUTE, now=day31 + MINUTE)) == ["violation"]
    assert run("temporary_lighting", data, day31 + MINUTE, day31 + 2 * MINUTE) == []
    assert run("temporary_lighting", data, day31, day31 + MINUTE, now=day31 - MINUTE) == []  # not begun yet


OF_30 = "of the 30 temporary-lighting days allowed in 2026 are used or declared"

# fmt: off
TEMPORARY_LIGHTING_WARNING_CASES = [
    case(20, [], id="6.C.6-plenty-left"),
    case(28, [f"28 {OF_30} (2 left)"], id="6.C.6-warn-2-left"),
    case(30, [f"30 {OF_30} (none left)"], id="6.C.6-warn-none-left"),
]
# fmt: on


@pytest.mark.parametrize(("days", "expected"), TEMPORARY_LIGHTING_WARNING_CASES)
def test_temporary_lighting_warning(days: int, expected: list[str]) -> None:
    data = SiteData(temporary_lighting=tuple(lit_days("2026-03-01", days)))
    warnings = [
        w
        for w in early_warnings(SITE, DOVRE, data, at("2026-04-15 12:00"))
        if w.standard == "temporary_lighting"
    ]
    assert [w.summary.split(" (section")[0] for w in warnings] == expected


def test_preexisting_site_is_held_to_lighting() -> None:
    # 1.4.C.1: "light dispersal" binds pre-existing operations.
    data = SiteData(light=tuple(light("l1", NIGHT, 1, 0.5, lux_max=300.0)))
    findings = evaluate_site(make_site(preexisting=True), DOVRE, data, NIGHT, NIGHT + MINUTE, NIGHT + MINUTE)
    assert [(f.standard, f.kind.value) for f in findings] == [("high_intensity_light", "violation")]


@pytest.mark.parametrize(
    ("local_time", "expected"),
    [
        pytest.param("2026-06-16 01:00", ["violation"], id="6.C.5-deep-night-judged"),
        pytest.param("2026-06-16 04:20", [], id="6.C.5-natural-twilight-before-civil-dawn-not-judged"),
        pytest.param("2026-06-15 22:00", [], id="6.C.5-natural-twilight-after-civil-dusk-not-judged"),
    ],
)
def test_upward_light_ignores_natural_twilight(local_time: str, expected: list[str]) -> None:
    """Civil dawn is 04:40, nautical dawn ~03:50: at 04:20 the sky brightens by itself."""
    when = at(local_time)
    history = light("s1", when - timedelta(hours=72), 72 * 6, 0.02, step_s=600.0)
    readings = [r for r in history if r.ts < when] + light("s1", when, 1, 0.5)
    findings = run("upward_light", SiteData(light=tuple(readings)), when, when + MINUTE)
    assert kinds(findings) == expected


# --- 6.C.3 "except for lighting on vehicles or moving equipment": the record decides first ---

GATED = dataclasses.replace(
    SITE,
    sensors={
        **SITE.sensors,
        "l2": SensorInfo("l2", SensorKind.LIGHT, Placement.SITE, "gate yard", ("north",)),
    },
)
WAIT_START = NIGHT - 2 * MINUTE
WAIT_END = NIGHT + MINUTE  # three minutes of a beacon while a truck waits at the north gate
THREE_MINUTES = flashing_minutes(3, hz=1.5, start=WAIT_START)


def at_gate(gate: str = "north", ts: datetime = WAIT_START) -> TruckPassage:
    return TruckPassage("pit1", "tp-1", ts, gate, "in", "T-17")


def present(ts: datetime = WAIT_START, end: datetime | None = WAIT_END, **fields: object) -> GenericEvent:
    return GenericEvent("pit1", "vp-1", "vehicle-present", ts, {"end": iso(end), **fields} if end else fields)


def work_at(sensors: tuple[str, ...]) -> WorkPeriod:
    return WorkPeriod("pit1", "w-1", WAIT_START, WAIT_END, WorkKind.REPAIR, sensors)


V, X = "violation", "exempt_exceedance"
DURATION, RECORD = "duration", "vehicle_record"
D, R, Data = DURATION, RECORD, SiteData
LAST_END = WAIT_END  # the last summary ends here; a truck's 300 s margin reaches back from its ts

# fmt: off
VEHICLE_BEACON_CASES = [
    case(Data(), [V, V], [D, D], id="6.C.3-no-record-3-min-is-fixed"),
    case(Data(trucks=(at_gate(),)), [X, X], [R, R], id="6.C.3-truck-waiting-at-the-gate"),
    case(Data(trucks=(at_gate("south"),)), [V, V], [D, D], id="6.C.3-truck-at-another-gate"),
    case(Data(trucks=(at_gate(ts=LAST_END + timedelta(seconds=299)),)), [V, X], [D, R],
         id="6.C.3-truck-299s-after-the-last-minute-covers-it"),
    case(Data(trucks=(at_gate(ts=LAST_END + timedelta(seconds=300)),)), [V, V], [D, D],
         id="6.C.3-truck-300s-after-the-last-minute-does-not"),
    case(Data(other_events=(present(gate="north"),)), [X, X], [R, R], id="6.C.3-vehicle-at-gate"),
    case(Data(other_events=(present(sensors=["l2"]),)), [X, X], [R, R], id="6.C.3-vehicle-at-sensor"),
    case(Data(other_events=(present(sensors=["l1"]),)), [V, V], [D, D],
         id="6.C.3-vehicle-elsewhere"),
    case(Data(other_events=(present(end=NIGHT - timedelta(seconds=1), gate="north"),)), [X, V],
         [R, D], id="6.C.3-vehicle-left-1s-before-the-last-minute"),
    case(Data(work=(work_at(("l2",)),)), [X, X], [R, R], id="6.C.3-work-declared-at-the-sensor"),
    case(Data(work=(work_at(()),)), [V, V], [D, D], id="6.C.3-site-wide-work-is-not-here"),
]
# fmt: on


@pytest.mark.parametrize(("records", "expected", "decided_by"), VEHICLE_BEACON_CASES)
def test_vehicle_beacon_is_told_by_the_record(
    records: SiteData, expected: list[str], decided_by: list[str]
) -> None:
    data = dataclasses.replace(records, light=tuple(THREE_MINUTES))
    findings = run("flashing_light", data, WAIT_START, WAIT_END, site=GATED)
    assert kinds(findings) == expected
    assert [f.details["decided_by"] for f in findings] == decided_by
    for finding in findings:
        if finding.kind.value == X:
            assert finding.exemptions and "vehicle" in finding.summary
            assert any(r.startswith(("truck:", "vehicle-present:", "work:")) for r in finding.refs)
        else:
            assert "no record puts a vehicle" in finding.details["decision"]


def test_short_beacon_without_a_record_is_still_a_vehicle_by_duration() -> None:
    assert (
        run("flashing_light", SiteData(light=tuple(beacon_minute())), NIGHT, NIGHT + MINUTE, site=GATED) == []
    )


def test_unusable_vehicle_record_is_reported_not_fatal() -> None:
    bad = GenericEvent("pit1", "vp-9", "vehicle-present", WAIT_START, {"gate": "north", "end": "soon"})
    data = SiteData(light=tuple(THREE_MINUTES), other_events=(bad,))
    findings = run("flashing_light", data, WAIT_START, WAIT_END, site=GATED)
    assert kinds(findings) == [V, V]
    assert findings[0].details["unusable_vehicle_records"] == [
        "vehicle-present vp-9: end: not a timestamp: 'soon'"
    ]


def test_flashing_finding_lists_the_vehicle_reading_as_considered() -> None:
    [finding, _] = run(
        "flashing_light", SiteData(light=tuple(THREE_MINUTES)), WAIT_START, WAIT_END, site=GATED
    )
    assert any("vehicle" in c for c in finding.details["considered"])
    assert any("only at night" in c for c in finding.details["considered"])


FERNHILL = load_profile(str(DATA / "profiles" / "fernhill.toml"))  # 20 days of temporary lighting, § 4.5(f)

# The texts citing the temporary lighting allowance cite it as the profile numbers it: Dovre's
# section with its words, Fernhill's section alone (its profile quotes none); never Dovre's 6.C.6
# for another town. (days before tonight, so that tonight is the allowance's last day or the next)
# fmt: off
ALLOWANCE_CITED_CASES = [
    case(DOVRE, 29, "light_trespass", "it was declared temporary lighting (declared temporary lighting "
         "tl-tonight), allowed under 6.C.6 within the year's 30 days", id="dovre-exempt-under-6.C.6"),
    case(DOVRE, 30, "light_trespass", "beyond the 30 days a year it may be used, so it does not exempt this "
         "light (section 6.C.6)", id="dovre-beyond-6.C.6"),
    case(FERNHILL, 19, "light_trespass", "it was declared temporary lighting (declared temporary lighting "
         "tl-tonight), allowed under § 4.5(f) within the year's 20 days", id="fernhill-exempt-under-§4.5(f)"),
    case(FERNHILL, 20, "light_trespass", "beyond the 20 days a year it may be used, so it does not exempt "
         "this light (§ 4.5(f))", id="fernhill-beyond-§4.5(f)"),
    case(FERNHILL, 20, "high_intensity_light", "beyond the 20 days a year it may be used, so it does not "
         "exempt this light (§ 4.5(f))", id="fernhill-high-intensity-beyond-§4.5(f)"),
]
# fmt: on


@pytest.mark.parametrize(("profile", "days_before", "standard", "said"), ALLOWANCE_CITED_CASES)
def test_the_temporary_lighting_allowance_is_cited_as_the_profile_numbers_it(
    profile: Profile, days_before: int, standard: str, said: str
) -> None:
    readings = light("l1", NIGHT - 10 * MINUTE, 11, 2.0, lux_max=300.0)
    data = SiteData(light=tuple(readings), temporary_lighting=(*lit_days("2026-05-01", days_before), TONIGHT))
    [finding] = run(standard, data, NIGHT, NIGHT + MINUTE, profile=profile)
    assert said in finding.summary
    [considered] = [c for c in finding.details["considered"] if c.startswith("Declared temporary lighting")]
    if profile is DOVRE:
        assert "(6.C.6: 'not longer than 30 total days within each year')" in considered
    else:
        assert "first 20 days of temporary lighting (§ 4.5(f)), counted" in considered
        assert "6.C" not in finding.summary + considered


def test_a_profile_naming_no_allowance_section_cites_none() -> None:
    """The default counting (a profile without a temporary lighting standard) cites no section."""
    from rules.lighting import TemporaryDays, temporary_considered

    said = temporary_considered(TemporaryDays())
    assert "first 30 days of temporary lighting, counted as" in said and "section" not in said


# A vehicle's lights are exempt as not a fixed light: Dovre cites 6.C (fixed_sources_section),
# Fernhill's profile names no such section and the text cites none.
@pytest.mark.parametrize(
    ("profile", "ending"),
    [
        case(DOVRE, "not a fixed light (section 6.C)", id="dovre-6.C"),
        case(FERNHILL, "not a fixed light", id="fernhill"),
    ],
)
def test_a_vehicles_lights_are_exempt_citing_the_profiles_section_only(profile: Profile, ending: str) -> None:
    data = SiteData(light=tuple(HEADLIGHTS), trucks=(truck_out(),))
    [finding] = run("high_intensity_light", data, NIGHT, NIGHT + MINUTE, site=GATE_ROAD, profile=profile)
    assert finding.kind == FindingKind.EXEMPT_EXCEEDANCE
    told = finding.summary.split("it is taken for the vehicle's lights, ", 1)[1]
    assert told == ending
