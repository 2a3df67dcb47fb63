"""Land-disturbing activity standards (§ 28-5) as a second profile: each deadline at its boundary,
the turbidity buffer line, fill material, and the switches (28-5(a)(1), landfill permit, express
permit, 28-8(b)(5)). Tables follow tests/rules/test_blasting.py; no fixtures, the clock is passed in."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from monitor.wire.protocol import BUILTIN_EVENTS
from rules import data_margins, early_warnings, evaluate_site
from rules.deadlines import WorkCalendar, last_day
from rules.episodes import update_episodes
from rules.model import (
    GenericEvent,
    Placement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
    TurbidityReading,
)
from rules.profile import _BUILTIN_EVENT_KINDS, ProfileError, build_profile, load_profile
from tests.support.land_disturbing import (
    LAND,
    at,
    day,
    ev,
    first_minute,
    kinds,
    records,
    run,
    site,
)

case = pytest.param


# ---------------------------------------------------------------------------
# The profile
# ---------------------------------------------------------------------------


def test_profile_cites_28_5_and_declares_its_record_kinds() -> None:
    sections = {key: s.section for key, s in LAND.standards.items()}
    assert sections == {
        "buffer_zone": "28-5(a)",
        "slopes": "28-5(b)",
        "fill_material": "28-5(c)",
        "erosion_control": "28-5(d)",
        "sediment_on_tract": "28-5(d)",
        "ground_cover": "28-5(d)",
        "prior_plan": "28-5(e)",
    }
    assert set(LAND.event_kinds) == {
        "slope-exposed", "slope-covered", "fill-delivery", "disturbance-started", "erosion-control-installed",
        "construction-completed", "ground-cover-established", "plan-filed", "plan-approved",
    }  # fmt: skip
    assert LAND.standard("slopes").text.endswith("sufficient to restrain erosion.")
    assert load_profile("dovre").event_kinds == ("vehicle-present",)  # 6.C.3 vehicle beacons
    # Events are not bounded by margins; only the turbidity rule needs readings around the interval.
    assert data_margins(LAND, "turbidity") == (timedelta(minutes=25), timedelta(minutes=10))
    assert data_margins(LAND, "sound") == (timedelta(0), timedelta(0))


def test_builtin_event_kinds_match_the_wire() -> None:
    assert frozenset(BUILTIN_EVENTS) == _BUILTIN_EVENT_KINDS


def minimal(**top: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "t",
        "title": "t",
        "authority": "t",
        "notice_prefix": "T",
        "event_kinds": ["slope-exposed", "slope-covered"],
        "standards": {
            "slopes": {
                "rule": "close_within",
                "section": "28-5(b)",
                "title": "x",
                "summary": "x",
                "text": "x",
                "required_action": "x",
                "params": {"open_kind": "slope-exposed", "close_kind": "slope-covered"},
            }
        },
    }
    raw.update(top)
    return raw


# fmt: off
PROFILE_ERRORS_CASES = [
    case({"event_kinds": ["slope-exposed"]},
         "standards.slopes.params: reads event kind 'slope-covered', which is not listed in event_kinds",
         id="kind-read-but-not-declared"),
    case({"event_kinds": ["slope-exposed", "slope-covered", "blast"]},
         "event_kinds[2]: 'blast' is a built-in event kind", id="builtin-kind"),
    case({"event_kinds": ["slope-exposed", "slope-covered", "Slope Exposed"]},
         "event_kinds[2]: 'Slope Exposed' is not a kind name", id="not-topic-safe"),
    case({"event_kinds": ["slope-exposed", "slope-covered", "slope-exposed"]},
         "event_kinds[2]: 'slope-exposed' is listed twice", id="listed-twice"),
    case({"event_kinds": "slope-exposed"}, "event_kinds: expected a list", id="not-a-list"),
]
# fmt: on


@pytest.mark.parametrize(("changes", "problem"), PROFILE_ERRORS_CASES)
def test_profile_event_kind_errors(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(ProfileError) as caught:
        build_profile(minimal(**changes), source="test")
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


# fmt: off
OVERRIDE_ERRORS_CASES = [
    case({"ground_cover.weekend": ["saturday", "sabbath"]}, "'sabbath' is not a weekday", id="weekday"),
    case({"ground_cover.holidays": ["July 4"]}, "expected dates like '2026-07-03'", id="holiday-date"),
    case({"slopes.calendar_days": -1}, "slopes.calendar_days: must be at least 0 days, got -1",
         id="negative-days"),
    case({"slopes.close_kind": "slope-seeded"}, "'slope-seeded', which is not listed", id="agreement-kind"),
    case({"buffer_zone.line_placement": "fence"}, "expected one of", id="placement"),
]
# fmt: on


@pytest.mark.parametrize(("overrides", "problem"), OVERRIDE_ERRORS_CASES)
def test_agreement_overrides_are_validated(overrides: dict[str, Any], problem: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("land-disturbing", overrides)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


# ---------------------------------------------------------------------------
# 28-5(b): slopes exposed more than 21 calendar days
# ---------------------------------------------------------------------------

EXPOSED = ev("slope-exposed", "s-3", "2026-05-01 10:00", area_sqft=1800)  # a Friday; day 21 is 22 May

# fmt: off
SLOPE_CASES = [
    case("2026-05-22 23:59", first_minute("2026-05-23"), [], id="28-5(b)-covered-on-day-21"),
    case("2026-05-23 08:00", first_minute("2026-05-23"), ["violation"], id="28-5(b)-covered-on-day-22"),
    case(None, first_minute("2026-05-23"), ["violation"], id="28-5(b)-never-covered-day-22"),
    case(None, (at("2026-05-22 23:59"), at("2026-05-23 00:00")), [], id="28-5(b)-last-minute-of-day-21"),
    case(None, first_minute("2026-05-24"), ["violation"], id="28-5(b)-continues-day-23"),
    case(None, (at("2026-05-24 00:01"), at("2026-05-24 23:59")), [], id="28-5(b)-once-a-day"),
    case("2026-05-23 08:00", first_minute("2026-05-24"), [], id="28-5(b)-covered-stops-it"),
    case("2026-05-05 12:00", first_minute("2026-05-23"), [], id="28-5(b)-covered-early"),
]
# fmt: on


@pytest.mark.parametrize(("covered", "window", "expected"), SLOPE_CASES)
def test_slope_exposed_21_calendar_days(
    covered: str | None, window: tuple[datetime, datetime], expected: list[str]
) -> None:
    data = records(EXPOSED, ev("slope-covered", "s-3", covered) if covered else None)
    findings = run("slopes", data, *window)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "28-5(b)" and "(section 28-5(b))" in finding.summary
        assert "Slope s-3" in finding.summary and "due by the end of 2026-05-22" in finding.summary
        assert finding.refs[0] == "slope-exposed:s-3"


def test_slope_violation_is_reported_once_per_day_and_forms_one_episode() -> None:
    data = records(EXPOSED, ev("slope-covered", "s-3", "2026-05-25 15:30"))
    findings = run("slopes", data, at("2026-05-20 00:00"), at("2026-05-28 00:00"))
    assert [f.start_local.strftime("%m-%d %H:%M") for f in findings] == [
        "05-23 00:00",
        "05-24 00:00",
        "05-25 00:00",
    ]
    assert findings[-1].end == at("2026-05-25 15:30")  # the cure ends the last day's finding
    assert [f.measurements[0].value for f in findings] == [1, 2, 3]
    assert "still not done on 2026-05-24" in findings[1].summary
    # Minute by minute (as the daemon evaluates) gives the same findings and ids.
    by_minute = [
        f
        for start in (at("2026-05-23 00:00"), at("2026-05-24 00:00"), at("2026-05-25 00:00"))
        for f in run("slopes", data, start, start + timedelta(minutes=1))
    ]
    assert [f.id for f in by_minute] == [f.id for f in findings]
    episodes = update_episodes([], findings, timedelta(seconds=LAND.episode_gap_s))
    assert len(episodes) == 1 and episodes[0].end == at("2026-05-25 15:30")


def test_two_slopes_overdue_on_the_same_day_share_one_finding() -> None:
    data = records(EXPOSED, ev("slope-exposed", "s-4", "2026-05-01 16:00"))
    (finding,) = run("slopes", data, *first_minute("2026-05-23"))
    assert "Slope s-3" in finding.summary and "Slope s-4" in finding.summary
    assert finding.refs == ("slope-exposed:s-3", "slope-exposed:s-4")


def test_a_deadline_not_yet_reached_is_not_judged_ahead_of_now() -> None:
    start, end = first_minute("2026-05-23")
    assert run("slopes", records(EXPOSED), start, end, now=start - timedelta(seconds=1)) == []


# fmt: off
SLOPE_WARNING_CASES = [
    case("2026-05-18 12:00", [], id="4-days-left"),
    case("2026-05-19 12:00", ["within 3 days"], id="3-days-left"),
    case("2026-05-22 12:00", ["(today)"], id="due-today"),
    case("2026-05-23 12:00", [], id="overdue-is-a-violation-not-a-warning"),
]
# fmt: on


@pytest.mark.parametrize(("now", "words"), SLOPE_WARNING_CASES)
def test_slope_early_warnings(now: str, words: list[str]) -> None:
    warnings = early_warnings(site(), LAND, records(EXPOSED), at(now))
    assert [w.standard for w in warnings] == ["slopes"] * len(words)
    for warning, word in zip(warnings, words, strict=True):
        assert word in warning.summary and "by the end of 2026-05-22" in warning.summary
        assert warning.kind.value == "warning" and warning.section == "28-5(b)"


# ---------------------------------------------------------------------------
# 28-5(d): ground cover within 15 working days or 90 calendar days, whichever is shorter
# ---------------------------------------------------------------------------

COMPLETED = ev("construction-completed", "lot-7", "2026-06-25 16:00", area_sqft=12000)  # a Thursday
HOLIDAY = {"ground_cover.holidays": ["2026-07-03"]}

# fmt: off
GROUND_COVER_DUE_CASES = [
    # Working days from Fri 26 June, skipping three weekends: the 15th is Thu 16 July.
    case({}, date(2026, 7, 16), id="15-working-days-across-weekends"),
    case(HOLIDAY, date(2026, 7, 17), id="15-working-days-across-a-holiday"),
    case({"ground_cover.holidays": ["2026-07-03"], "ground_cover.weekend": ["sunday"]}, date(2026, 7, 14),
         id="six-day-week-by-agreement"),
    # 75 working days by agreement would end 7 October; 90 calendar days end 23 September, first.
    case({"ground_cover.working_days": 75}, date(2026, 9, 23), id="90-calendar-days-shorter"),
]
# fmt: on


@pytest.mark.parametrize(("overrides", "due"), GROUND_COVER_DUE_CASES)
def test_ground_cover_deadline_whichever_is_shorter(overrides: dict[str, Any], due: date) -> None:
    profile = load_profile("land-disturbing", overrides)
    params = profile.params("ground_cover")
    assert last_day(date(2026, 6, 25), params.calendar_days, params.working_days, params.calendar) == due
    data = records(COMPLETED, ev("ground-cover-established", "lot-7", f"{due.isoformat()} 17:00"))
    assert run("ground_cover", data, *day(due.isoformat()), profile=profile) == []  # cover on the last day
    overdue = records(COMPLETED, ev("ground-cover-established", "lot-7", f"{due + timedelta(days=1)} 09:00"))
    the_day_after = (due + timedelta(days=1)).isoformat()
    (finding,) = run("ground_cover", overdue, *first_minute(the_day_after), profile=profile)
    assert finding.kind.value == "violation" and finding.section == "28-5(d)"
    assert f"due by the end of {due.isoformat()}" in finding.summary
    assert "15 working days or 90 calendar days" in finding.summary or "75 working days" in finding.summary


# fmt: off
GROUND_COVER_CASES = [
    case(None, "2026-07-16", {}, [], id="28-5(d)-15th-working-day"),
    case(None, "2026-07-17", {}, ["violation"], id="28-5(d)-16th-working-day"),
    case(None, "2026-07-17", HOLIDAY, [], id="28-5(d)-holiday-gives-one-more-day"),
    case(None, "2026-07-18", HOLIDAY, ["violation"], id="28-5(d)-holiday-overdue-from-saturday"),
    case("2026-07-16 18:00", "2026-07-17", {}, [], id="28-5(d)-covered-on-the-15th-working-day"),
    case(None, "2026-07-20", HOLIDAY, ["violation"], id="28-5(d)-continues-over-the-weekend"),
]
# fmt: on


@pytest.mark.parametrize(("covered", "local_day", "overrides", "expected"), GROUND_COVER_CASES)
def test_ground_cover_after_completion(
    covered: str | None, local_day: str, overrides: dict[str, Any], expected: list[str]
) -> None:
    data = records(COMPLETED, ev("ground-cover-established", "lot-7", covered) if covered else None)
    findings = run("ground_cover", data, *day(local_day), profile=load_profile("land-disturbing", overrides))
    assert kinds(findings) == expected


def test_ground_cover_applies_only_over_5000_square_feet() -> None:
    small = ev("construction-completed", "shed", "2026-06-25 16:00", area_sqft=4000)
    unstated = ev("construction-completed", "barn", "2026-06-25 16:00")
    findings = run("ground_cover", records(small, unstated), *first_minute("2026-07-17"))
    assert len(findings) == 1 and "Activity barn" in findings[0].summary and "shed" not in findings[0].summary


# fmt: off
EXCEPTION_CASES = [
    case({}, {}, ["violation"], id="28-8(b)(5)-off"),
    case({"ground_cover_exception": True}, {}, ["exempt_exceedance"], id="28-8(b)(5)-site-flag"),
    case({}, {"ground_cover.exception": True}, ["exempt_exceedance"], id="28-8(b)(5)-agreement"),
    case({"ground_cover_exception": "yes"}, {}, ["violation"], id="28-8(b)(5)-flag-must-be-true"),
]
# fmt: on


@pytest.mark.parametrize(("flags", "overrides", "expected"), EXCEPTION_CASES)
def test_28_8_b_5_switch(flags: dict[str, Any], overrides: dict[str, Any], expected: list[str]) -> None:
    profile = load_profile("land-disturbing", overrides)
    findings = run(
        "ground_cover", records(COMPLETED), *first_minute("2026-07-17"), profile=profile, where=site(flags)
    )
    assert kinds(findings) == expected
    if expected == ["exempt_exceedance"]:
        assert findings[0].exemptions and "28-8(b)(5) applies to this site" in findings[0].exemptions[0]
        # Suspended: no continuing violation on later days, and no warnings ahead of it.
        assert (
            run("ground_cover", records(COMPLETED), *day("2026-07-20"), profile=profile, where=site(flags))
            == []
        )
        warnings = early_warnings(site(flags), profile, records(COMPLETED), at("2026-07-15 12:00"))
        assert [w for w in warnings if w.standard == "ground_cover"] == []


def test_28_8_b_5_with_its_own_period() -> None:
    profile = load_profile(
        "land-disturbing", {"ground_cover.exception": True, "ground_cover.exception_working_days": 10}
    )
    # Ten working days from 25 June (3 July a working day): Thu 9 July is the last.
    (finding,) = run("ground_cover", records(COMPLETED), *first_minute("2026-07-10"), profile=profile)
    assert finding.kind.value == "violation" and "10 working days" in finding.summary
    assert "(section 28-5(d), 28-8(b)(5))" in finding.summary


def test_work_calendar() -> None:
    calendar = WorkCalendar.of(("saturday", "sunday"), ("2026-07-03",))
    assert calendar.add_working_days(date(2026, 7, 2), 1) == date(2026, 7, 6)
    assert calendar.add_working_days(date(2026, 7, 4), 1) == date(2026, 7, 6)  # from a Saturday
    assert not calendar.is_working(date(2026, 7, 3)) and calendar.is_working(date(2026, 7, 2))


# ---------------------------------------------------------------------------
# 28-5(d): erosion control devices once more than 5,000 square feet is uncovered
# ---------------------------------------------------------------------------

LOT_A = ev("disturbance-started", "lot-a", "2026-06-01 08:00", area_sqft=3000)
LOT_B = ev("disturbance-started", "lot-b", "2026-06-03 09:15", area_sqft=2500)  # total 5,500 from here

# fmt: off
EROSION_CONTROL_CASES = [
    case([LOT_A], None, (at("2026-06-01 00:00"), at("2026-06-10 00:00")), [], id="3000-sq-ft-only"),
    case([LOT_A, LOT_B], None, (at("2026-06-03 09:15"), at("2026-06-03 09:16")), ["violation"],
         id="over-5000-without-devices"),
    case([LOT_A, LOT_B], "2026-06-03 09:15", (at("2026-06-03 09:15"), at("2026-06-03 09:16")), [],
         id="devices-declared-in-time"),
    case([LOT_A, LOT_B], "2026-06-03 14:00", first_minute("2026-06-04"), [], id="devices-later-stop-it"),
    case([LOT_A, LOT_B], None, first_minute("2026-06-04"), ["violation"], id="continues-next-day"),
    case([LOT_A, LOT_B, ev("ground-cover-established", "lot-a", "2026-06-03 20:00")], None,
         first_minute("2026-06-04"), [], id="covered-back-under-5000"),
]
# fmt: on


@pytest.mark.parametrize(("opened", "installed", "window", "expected"), EROSION_CONTROL_CASES)
def test_erosion_control_devices(
    opened: list[GenericEvent], installed: str | None, window: tuple[datetime, datetime], expected: list[str]
) -> None:
    measure = ev("erosion-control-installed", "silt-fence-1", installed) if installed else None
    findings = run("erosion_control", records(*opened, measure), *window)
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "28-5(d)" and finding.measurements[0].value == 5500


# ---------------------------------------------------------------------------
# 28-5(e): plan filed 30 or more days before, and approved before, the start
# ---------------------------------------------------------------------------

START = "2026-06-01 07:30"


def plan_records(
    filed: str | None, approved: str | None, area: float | None = 12000, **extra: Any
) -> SiteData:
    fields: dict[str, Any] = {"area_sqft": area} if area is not None else {}
    fields.update(extra)
    return records(
        ev("plan-filed", "P-12", filed) if filed else None,
        ev("plan-approved", "P-12", approved) if approved else None,
        ev("disturbance-started", "lot-7", START, plan_id="P-12", **fields),
    )


# fmt: off
PRIOR_PLAN_CASES = [
    case("2026-05-02 15:00", "2026-05-20 10:00", {}, {}, ["compliant"], id="28-5(e)-30-days"),
    case("2026-05-03 09:00", "2026-05-20 10:00", {}, {}, ["violation"], id="28-5(e)-29-days"),
    case("2026-05-02 15:00", None, {}, {}, ["violation"], id="28-5(e)-not-approved"),
    case("2026-05-02 15:00", "2026-06-01 07:31", {}, {}, ["violation"], id="28-5(e)-approved-after-start"),
    case("2026-05-02 15:00", "2026-06-01 07:30", {}, {}, ["compliant"], id="28-5(e)-approved-at-start"),
    case(None, None, {}, {}, ["violation"], id="28-5(e)-no-plan"),
    case("2026-05-28 09:00", "2026-05-31 10:00", {"express_permit": True}, {}, ["compliant"],
         id="28-5(e)-express-flag-4-days"),
    case("2026-05-28 09:00", "2026-05-31 10:00", {}, {"prior_plan.express_permit": True}, ["compliant"],
         id="28-5(e)-express-agreement"),
    case("2026-05-28 09:00", None, {"express_permit": True}, {}, ["violation"],
         id="28-5(e)-express-still-needs-approval"),
    case("2026-06-01 09:00", "2026-06-01 10:00", {"express_permit": True}, {}, ["violation"],
         id="28-5(e)-express-filed-after-start"),
    case("2026-05-28 09:00", "2026-05-31 10:00", {}, {}, ["violation"], id="28-5(e)-4-days-no-express"),
]
# fmt: on


@pytest.mark.parametrize(("filed", "approved", "flags", "overrides", "expected"), PRIOR_PLAN_CASES)
def test_prior_plan_approval(
    filed: str | None,
    approved: str | None,
    flags: dict[str, Any],
    overrides: dict[str, Any],
    expected: list[str],
) -> None:
    profile = load_profile("land-disturbing", overrides)
    window = (at(START), at(START) + timedelta(minutes=1))
    findings = run("prior_plan", plan_records(filed, approved), *window, profile=profile, where=site(flags))
    assert kinds(findings) == expected
    (finding,) = findings
    assert finding.section == "28-5(e)" and "activity lot-7" in finding.summary
    assert "disturbance-started:lot-7" in finding.refs


def test_prior_plan_reasons_and_size() -> None:
    window = (at(START), at(START) + timedelta(minutes=1))
    (late,) = run("prior_plan", plan_records("2026-05-03 09:00", None), *window)
    assert "filed 29 days before the start, less than the 30 days required" in late.summary
    assert "not approved before the start" in late.summary
    assert late.measurements[0].value == 29 and late.measurements[0].limit == 30
    assert run("prior_plan", plan_records(None, None, area=5000), *window) == []  # "more than 5,000"
    (unstated,) = run("prior_plan", plan_records(None, None, area=None), *window)
    assert unstated.kind.value == "violation" and "an unstated area" in unstated.summary
    assert "but no plan P-12 was filed or approved (section 28-5(e))" in unstated.summary
    # Outside the interval: judged only by the evaluation holding the start.
    assert run("prior_plan", plan_records(None, None), window[1], window[1] + timedelta(minutes=1)) == []


def test_prior_plan_early_warning() -> None:
    data = records(ev("plan-filed", "P-20", "2026-05-10 09:00"))
    (warning,) = [
        w for w in early_warnings(site(), LAND, data, at("2026-05-12 12:00")) if w.standard == "prior_plan"
    ]
    assert warning.summary.startswith(
        "Land-disturbing activity under plan P-20 may start on 2026-06-09 at the earliest, and only once"
    )


# ---------------------------------------------------------------------------
# 28-5(a): turbidity beyond the buffer line, and the on/over/under-water exemption
# ---------------------------------------------------------------------------

T0 = at("2026-06-10 09:00")


def turbidity(line: float, reference: float | None, minutes: int = 15, site_id: str = "tract1") -> SiteData:
    readings = []
    for i in range(minutes):
        ts = T0 + timedelta(minutes=i)
        readings.append(TurbidityReading(site_id, "t1", ts, 60.0, line))
        if reference is not None:
            readings.append(TurbidityReading(site_id, "r1", ts, 60.0, reference))
    return SiteData(turbidity=tuple(sorted(readings, key=lambda r: (r.ts, r.sensor))))


# fmt: off
TURBIDITY_CASES = [
    case(40.0, 10.0, 15, {}, ["violation"] * 5, id="28-5(a)-30-above-reference-15-min"),
    case(34.0, 10.0, 15, {}, [], id="28-5(a)-24-above-reference"),
    case(40.0, 10.0, 10, {}, [], id="28-5(a)-exactly-10-min-not-longer"),
    case(40.0, 10.0, 11, {}, ["violation"], id="28-5(a)-11-min"),
    case(60.0, None, 15, {}, ["violation"] * 5, id="28-5(a)-over-50-ntu-no-reference"),
    case(40.0, None, 15, {}, [], id="28-5(a)-no-reference-under-50"),
    case(40.0, 10.0, 15, {"activity_over_water": True}, ["exempt_exceedance"] * 5,
         id="28-5(a)(1)-over-water"),
    case(40.0, 10.0, 15, {"activity_over_water": False}, ["violation"] * 5, id="28-5(a)(1)-flag-false"),
]
# fmt: on


@pytest.mark.parametrize(("line", "reference", "minutes", "flags", "expected"), TURBIDITY_CASES)
def test_turbidity_at_the_buffer_line(
    line: float, reference: float | None, minutes: int, flags: dict[str, Any], expected: list[str]
) -> None:
    findings = run(
        "buffer_zone", turbidity(line, reference, minutes), T0, T0 + timedelta(minutes=20), where=site(flags)
    )
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.sensors == ("t1",) and finding.section == "28-5(a)"
        assert "buffer-line sensor t1 (creek, 25 % line)" in finding.summary
    if findings:
        assert findings[0].start == T0 + timedelta(minutes=10)  # first minute past ten minutes
    if flags.get("activity_over_water"):
        assert "28-5(a)(1)" in findings[0].exemptions[0]


@pytest.mark.parametrize(
    ("line", "reference", "condition"),
    [
        (40.0, 10.0, "40 NTU, 30 NTU above the reference (10 NTU; the profile's limit: 25 NTU above it)"),
        (60.0, None, "60 NTU, above the profile's 50 NTU limit"),
    ],
)
def test_turbidity_findings_give_the_ntu_limits_as_the_profiles_not_28_5_a(
    line: float, reference: float | None, condition: str
) -> None:
    """28-5(a) says "visible siltation" and sets no number: the summary names the limit as the
    profile's, and the finding carries the profile's considered text giving its source."""
    finding = run("buffer_zone", turbidity(line, reference), T0, T0 + timedelta(minutes=20))[0]
    assert condition in finding.summary
    assert finding.summary.endswith(
        ": read as visible siltation beyond the buffer line (section 28-5(a), which sets no turbidity number)"
    )
    assert "limit 25 NTU" not in finding.summary and "the 50 NTU limit" not in finding.summary
    [source] = [c for c in finding.details["considered"] if "15A NCAC 02B .0211" in c]
    assert source.startswith("Section 28-5(a) sets no turbidity number for 'visible siltation'.")


def test_turbidity_findings_speak_the_profiles_words_not_28_5() -> None:
    """The turbidity rule wrote land-disturbing's words in its code ("visible siltation beyond
    the buffer line", "28-5(a)(1): the activity is on, over or under the water"), so another
    town's buffer standard read them: they are its params now, land-disturbing's in its profile."""
    from rules.profile import _read_profile

    other, _ = _read_profile("land-disturbing")
    standard = other["standards"]["buffer_zone"]
    standard["section"] = "§ 7.3"
    standard["params"].update(
        reading="sediment leaving the stream buffer",
        exempt_source="§ 7.3(c)",
        exempt_reading="the work is a permitted crossing",
    )
    town = build_profile(other, source="other town")
    data = turbidity(40.0, 10.0)
    for flags, said in (
        ({}, ""),
        ({"activity_over_water": True}, "; § 7.3(c): the work is a permitted crossing"),
    ):
        finding = run("buffer_zone", data, T0, T0 + timedelta(minutes=20), profile=town, where=site(flags))[0]
        assert finding.summary.split(": read as ", 1)[1] == (
            f"sediment leaving the stream buffer (§ 7.3, which sets no turbidity number){said}"
            + (" (site flag activity_over_water), so § 7.3 does not apply" if said else "")
        )
        assert "28-5" not in finding.summary and "siltation" not in finding.summary
        assert all("28-5" not in e for e in finding.exemptions)
    # land-disturbing's own texts are as they were
    exempt = run(
        "buffer_zone", data, T0, T0 + timedelta(minutes=20), where=site({"activity_over_water": True})
    )
    assert exempt[0].exemptions == (
        "28-5(a)(1): the activity is on, over or under the water (site flag activity_over_water)",
    )


# ---------------------------------------------------------------------------
# 28-5(d): sediment at the tract's boundary, judged where the site's area is given and over 5,000
# ---------------------------------------------------------------------------

TRACT_SENSORS = {
    "b1": SensorInfo("b1", SensorKind.TURBIDITY, Placement.BOUNDARY, "outfall at the south line"),
    "r1": SensorInfo("r1", SensorKind.TURBIDITY, Placement.REFERENCE, "creek, upstream"),
}


def tract(flags: dict[str, Any]) -> SiteContext:
    return replace(site(flags), sensors=TRACT_SENSORS)


def at_boundary(line: float, reference: float | None, minutes: int = 15) -> SiteData:
    data = turbidity(line, reference, minutes)
    return SiteData(
        turbidity=tuple(replace(r, sensor="b1") if r.sensor == "t1" else r for r in data.turbidity)
    )


NOT_GIVEN = (
    "not judged: area not given (no disturbance-started record, nor site fact disturbed_area_sqft; section"
    " 28-5(d) applies where the area is"
)
# fmt: off
TRACT_CASES = [
    case({}, 40.0, ["info"] * 5, f"{NOT_GIVEN} more than 5,000 sq ft)", id="area-not-given"),
    case({"disturbed_area_sqft": 12000}, 40.0, ["violation"] * 5,
         "read as sediment not retained within the boundaries of the tract (section 28-5(d), which sets no"
         " turbidity number)", id="area-over-5000"),
    case({"disturbed_area_sqft": 5000.5}, 40.0, ["violation"] * 5, "read as", id="area-just-over"),
    case({"disturbed_area_sqft": 5000}, 40.0, ["info"] * 5,
         "not judged: the site's area, 5,000 sq ft (site fact disturbed_area_sqft), is not more than"
         " 5,000 sq ft (section 28-5(d))", id="area-exactly-5000-not-more"),
    case({"disturbed_area_sqft": "12000"}, 40.0, ["info"] * 5,
         "not judged: area not given (site fact disturbed_area_sqft is '12000', not square feet;",
         id="area-a-text"),
    case({"disturbed_area_sqft": True}, 40.0, ["info"] * 5, "is True, not square feet", id="area-a-flag"),
    case({"disturbed_area_sqft": 12000}, 34.0, [], "", id="area-over-turbidity-within-limits"),
    case({}, 34.0, [], "", id="area-not-given-turbidity-within-limits"),
]
# fmt: on


@pytest.mark.parametrize(("flags", "line", "expected", "said"), TRACT_CASES)
def test_sediment_at_the_tract_boundary_is_judged_only_where_the_area_is_given_and_over(
    flags: dict[str, Any], line: float, expected: list[str], said: str
) -> None:
    """28-5(d) asks for sediment kept on the tract only "where more than 5,000 square feet is
    uncovered": judged where the site's area is configured and over it; elsewhere a reading
    beyond the limits says why it is not judged rather than guessing an area."""
    findings = run(
        "sediment_on_tract", at_boundary(line, 10.0), T0, T0 + timedelta(minutes=20), where=tract(flags)
    )
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.sensors == ("b1",) and finding.section == "28-5(d)"
        assert said in finding.summary and finding.exemptions == ()
    warned = [
        w.standard
        for w in early_warnings(tract(flags), LAND, at_boundary(line, 10.0, 5), T0 + timedelta(minutes=5))
    ]
    assert warned == (["sediment_on_tract"] if expected == ["violation"] * 5 else [])


def test_the_area_condition_is_the_profiles_data() -> None:
    """Another town's copy sets its own site fact and threshold; without them (the buffer line
    of 28-5(a)) a turbidity standard is judged at every site."""
    from rules.profile import _read_profile

    other, _ = _read_profile("land-disturbing")
    other["standards"]["sediment_on_tract"]["params"].update(
        area_flag="site_acres_sqft", area_over_sqft=1000.0
    )
    town = build_profile(other, source="other town")
    data, window = at_boundary(40.0, 10.0), (T0, T0 + timedelta(minutes=20))
    judged = run("sediment_on_tract", data, *window, profile=town, where=tract({"site_acres_sqft": 2000}))
    assert kinds(judged) == ["violation"] * 5
    unjudged = run(
        "sediment_on_tract", data, *window, profile=town, where=tract({"disturbed_area_sqft": 9000})
    )
    assert kinds(unjudged) == ["info"] * 5 and "site fact site_acres_sqft;" in unjudged[0].summary
    assert LAND.standard("buffer_zone").params.area_flag == ""
    assert kinds(run("buffer_zone", turbidity(40.0, 10.0), *window)) == ["violation"] * 5


# ---------------------------------------------------------------------------
# 28-5(d): the area uncovered when the reading was taken, from the records erosion_control reads
# ---------------------------------------------------------------------------

STARTED_AREA = "2026-06-01 08:00"  # readings beyond the limits from 09:00 on 10 June, judged 09:10-09:14


def opened(area: float | None, when: str = STARTED_AREA, lot: str = "lot-9") -> GenericEvent:
    fields: dict[str, Any] = {} if area is None else {"area_sqft": area}
    return ev("disturbance-started", lot, when, **fields)


def covered(when: str, lot: str = "lot-9") -> GenericEvent:
    return ev("ground-cover-established", lot, when)


BELOW = "is not more than 5,000 sq ft (section 28-5(d))"
# fmt: off
RECORDED_AREA_CASES = [
    case([opened(9000)], {}, ["violation"] * 5, True,
         "(section 28-5(d), which sets no turbidity number), with 9,000 sq ft uncovered then"
         " (disturbance-started records open: lot-9)", id="records-9000-open"),
    case([opened(3000, lot="lot-a"), opened(2500, "2026-06-03 09:15", "lot-b")], {}, ["violation"] * 5, True,
         "with 5,500 sq ft uncovered then (disturbance-started records open: lot-a, lot-b)",
         id="records-summed"),
    case([opened(5000)], {}, ["info"] * 5, False,
         "not judged: the area uncovered then, 5,000 sq ft (disturbance-started records open: lot-9),"
         f" {BELOW}", id="records-exactly-5000-not-more"),
    case([opened(9000), covered("2026-06-05 12:00")], {}, ["info"] * 5, False,
         f"not judged: the area uncovered then, 0 sq ft (disturbance-started records open: none), {BELOW}",
         id="records-covered-before-the-readings"),
    case([covered("2026-05-31 12:00"), opened(9000)], {}, ["violation"] * 5, True, "with 9,000 sq ft",
         id="records-cover-dated-before-the-start-closes-nothing"),
    case([opened(9000, "2026-06-11 08:00")], {}, ["info"] * 5, False,
         f"not judged: the area uncovered then, 0 sq ft (disturbance-started records open: none), {BELOW}",
         id="records-activity-started-after-the-readings"),
    case([opened(None)], {}, ["violation"] * 5, True,
         "with land-disturbing activity of unknown size uncovered then (disturbance-started lot-9 gives no"
         " area_sqft), possibly more than 5,000 sq ft: record the area (area_sqft)",
         id="records-area-unknown"),
    case([opened(2000), opened("9000", lot="lot-x")], {}, ["violation"] * 5, True,
         "(disturbance-started lot-x gives no area_sqft), possibly more than 5,000",
         id="records-area-a-text"),
    case([opened(3000)], {"disturbed_area_sqft": 12000}, ["info"] * 5, False,
         f"3,000 sq ft (disturbance-started records open: lot-9), {BELOW}",
         id="records-win-over-a-larger-flag"),
    case([opened(9000)], {"disturbed_area_sqft": 2000}, ["violation"] * 5, True, "with 9,000 sq ft",
         id="records-win-over-a-smaller-flag"),
    # The area at the time of each reading: the activity starts, or its ground is covered, mid-run.
    case([opened(9000, "2026-06-10 09:12")], {}, ["info", "info", "violation", "violation", "violation"],
         False, "", id="records-started-during-the-run"),
    case([opened(9000), covered("2026-06-10 09:12")], {},
         ["violation", "violation", "info", "info", "info"], True, "", id="records-covered-during-the-run"),
]
# fmt: on


@pytest.mark.parametrize(("events", "flags", "expected", "warns", "said"), RECORDED_AREA_CASES)
def test_sediment_at_the_tract_boundary_is_judged_by_the_area_the_records_say_was_uncovered_then(
    events: list[GenericEvent], flags: dict[str, Any], expected: list[str], warns: bool, said: str
) -> None:
    """28-5(d) applies "where more than 5,000 square feet is uncovered": the area is the one the
    operator's records say was uncovered when each reading was taken, the area erosion_control
    judges, and where the site has such records they decide over the configured figure."""
    data = replace(at_boundary(40.0, 10.0), other_events=tuple(events))
    findings = run("sediment_on_tract", data, T0, T0 + timedelta(minutes=20), where=tract(flags))
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.sensors == ("b1",) and finding.section == "28-5(d)"
        judged = finding.kind.value == "violation"
        assert (
            "read as sediment not retained" in finding.summary if judged else "not judged" in finding.summary
        )
        assert finding.details["area_requested"] == ("unknown size" in finding.summary)
    assert all(said in f.summary for f in findings if f.kind == findings[0].kind)
    early = replace(at_boundary(40.0, 10.0, 5), other_events=tuple(events))
    warned = [w.standard for w in early_warnings(tract(flags), LAND, early, T0 + timedelta(minutes=5))]
    assert warned == (["sediment_on_tract"] if warns else [])


def test_both_standards_of_28_5_d_read_one_uncovered_area() -> None:
    """erosion_control and sediment_on_tract judge the same area: over 5,000 sq ft from lot-b's
    start until lot-a's ground is covered at 09:13 on 10 June, and the sediment finding names the
    records it rests on."""
    events = (
        opened(3000, lot="lot-a"),
        opened(2500, "2026-06-03 09:15", "lot-b"),
        covered("2026-06-10 09:13", "lot-a"),
    )
    data = replace(at_boundary(40.0, 10.0), other_events=events)
    (devices,) = run("erosion_control", data, *day("2026-06-10"), where=tract({}))
    assert devices.measurements[0].value == 5500 and devices.details["over_since"] == "2026-06-03T13:15:00Z"
    assert run("erosion_control", data, *day("2026-06-11"), where=tract({})) == []  # covered: no longer over
    sediment = run("sediment_on_tract", data, T0, T0 + timedelta(minutes=20), where=tract({}))
    assert kinds(sediment) == ["violation"] * 3 + ["info"] * 2  # 09:10-09:12, then 09:13-09:14
    assert [f.details["uncovered_sqft"] for f in sediment] == [5500] * 3 + [2500] * 2
    both = ("disturbance-started:lot-a", "disturbance-started:lot-b")
    assert sediment[0].details["area_records"] == list(both) and set(both) <= set(sediment[0].refs)
    assert sediment[-1].details["area_records"] == [both[1]]


def test_the_records_are_read_only_where_the_profile_names_them() -> None:
    """Another town's copy without the record kinds keeps the configured figure alone; a record
    kind named without its area field, or not declared, is refused when the profile loads."""
    from rules.profile import _read_profile

    other, _ = _read_profile("land-disturbing")
    other["standards"]["sediment_on_tract"]["params"].update(
        area_open_kind="", area_close_kind="", area_record_field=""
    )
    town = build_profile(other, source="other town")
    data = replace(at_boundary(40.0, 10.0), other_events=(opened(9000),))
    window = (T0, T0 + timedelta(minutes=20))
    unjudged = run("sediment_on_tract", data, *window, profile=town, where=tract({}))
    assert kinds(unjudged) == ["info"] * 5
    assert "not judged: area not given (site fact disturbed_area_sqft; section 28-5(d)" in unjudged[0].summary
    assert "area_records" not in unjudged[0].details
    flagged = run(
        "sediment_on_tract", data, *window, profile=town, where=tract({"disturbed_area_sqft": 3000})
    )
    assert kinds(flagged) == ["info"] * 5
    for changes, problem in (
        ({"area_record_field": ""}, "area_record_field: required with area_open_kind"),
        ({"area_open_kind": "activity-begun"}, "reads event kind 'activity-begun', which is not listed"),
    ):
        broken, _ = _read_profile("land-disturbing")
        broken["standards"]["sediment_on_tract"]["params"].update(changes)
        with pytest.raises(ProfileError) as caught:
            build_profile(broken, source="other town")
        assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_turbidity_minutes_match_whole_interval_and_early_warning() -> None:
    data = turbidity(40.0, 10.0, 15)
    whole = run("buffer_zone", data, T0, T0 + timedelta(minutes=20))
    minutes = [
        f
        for m in range(20)
        for f in run("buffer_zone", data, T0 + timedelta(minutes=m), T0 + timedelta(minutes=m + 1))
    ]
    assert [f.id for f in minutes] == [f.id for f in whole]
    assert whole[0].measurements[1].value == 30.0 and whole[0].completeness == 1.0
    (warning,) = early_warnings(site(), LAND, turbidity(40.0, 10.0, 5), T0 + timedelta(minutes=5))
    assert warning.standard == "buffer_zone" and "more minutes" in warning.summary


# ---------------------------------------------------------------------------
# 28-5(c): fill material, and the landfill permit
# ---------------------------------------------------------------------------

DELIVERY = "2026-06-02 11:20"


def load(material: str, piece: float, organic: bool | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"material": material, "max_piece_in": piece}
    return fields if organic is None else {**fields, "organic": organic}


# fmt: off
FILL_CASES = [
    case(load("clean sandy clay", 0, False), {}, ["compliant"], id="clean"),
    case(load("topsoil with roots", 0, True), {}, ["violation"], id="organic"),
    case(load("broken concrete", 12, False), {}, ["compliant"], id="12-inches"),
    case(load("broken concrete", 14, False), {}, ["violation"], id="14-inches"),
    case(load("soil and old TIRES", 0, False), {}, ["violation"], id="prohibited-term"),
    case(load("soil", 0, None), {}, ["info"], id="organic-not-recorded"),
    case(load("topsoil with roots", 0, True), {"landfill_permit": True}, ["exempt_exceedance"],
         id="landfill-permit-on-file"),
    case(load("clean sandy clay", 0, False), {"landfill_permit": True}, ["compliant"],
         id="landfill-permit-clean-load"),
]
# fmt: on


@pytest.mark.parametrize(("fields", "flags", "expected"), FILL_CASES)
def test_fill_material(fields: dict[str, Any], flags: dict[str, Any], expected: list[str]) -> None:
    data = records(ev("fill-delivery", "load-88", DELIVERY, **fields))
    findings = run(
        "fill_material", data, at(DELIVERY), at(DELIVERY) + timedelta(minutes=1), where=site(flags)
    )
    assert kinds(findings) == expected
    assert findings[0].section == "28-5(c)" and findings[0].refs == ("fill-delivery:load-88",)
    if expected == ["violation"] and fields.get("max_piece_in") == 14:
        assert "14 inches, more than 12 inches" in findings[0].summary
    if expected == ["exempt_exceedance"]:
        assert "landfill permit is on file" in findings[0].exemptions[0]


# ---------------------------------------------------------------------------
# Whole profile, and other sites' records
# ---------------------------------------------------------------------------


def test_evaluate_site_over_a_day_with_everything() -> None:
    data = SiteData(
        turbidity=turbidity(40.0, 10.0, 15).turbidity,
        other_events=(
            EXPOSED,
            LOT_A,
            LOT_B,
            ev(
                "fill-delivery", "load-1", "2026-06-10 11:00", material="stumps", max_piece_in=0, organic=True
            ),
            ev("disturbance-started", "lot-9", "2026-06-10 12:00", area_sqft=9000),
        ),
    )
    findings = evaluate_site(site(), LAND, data, *day("2026-06-10"), now=at("2026-06-11 00:00"))
    violations = {(f.standard, f.section) for f in findings if f.kind.value == "violation"}
    assert violations == {
        ("buffer_zone", "28-5(a)"),
        ("slopes", "28-5(b)"),
        ("fill_material", "28-5(c)"),
        ("erosion_control", "28-5(d)"),
        ("prior_plan", "28-5(e)"),
    }
    # Another site's records change nothing here.
    foreign = (
        *(GenericEvent("other", e.id, e.kind, e.ts, e.fields) for e in data.other_events),
        ev("slope-covered", "s-3", "2026-05-02 09:00", site_id="other"),
    )
    mixed = SiteData(turbidity=data.turbidity, other_events=data.other_events + foreign)
    assert evaluate_site(site(), LAND, mixed, *day("2026-06-10"), now=at("2026-06-11 00:00")) == findings
