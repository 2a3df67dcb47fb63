"""Ground vibration and airblast (6.F via SPS 307): limit curves as profile data, judged per axis."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from datetime import timedelta

import pytest

from rules.model import AxisPeak, SeismicEvent, SiteData
from rules.profile import ProfileError, build_profile, load_profile
from rules.seismic_limits import MM_PER_IN, airblast_limit, limit_at
from tests.support.paths import REPO
from tests.support.rule_builders import DOVRE, at, blast, run

TS = at("2026-06-15 11:00:00")
IN = MM_PER_IN
case = pytest.param


def event(
    t: tuple[float, float],
    v: tuple[float, float] = (0.05, 20.0),
    lo: tuple[float, float] = (0.05, 20.0),
    airblast_pa: float | None = None,
    mic_low_hz: float | None = 2.0,
    clipped: str = "",
    source: str = "waveforms",
) -> SeismicEvent:
    """An event with axis peaks given as (PPV in/s, zero-crossing Hz)."""
    axes = tuple(
        AxisPeak(name, ppv * IN, hz, hz, name in clipped)
        for name, (ppv, hz) in zip("TVL", (t, v, lo), strict=True)
    )
    pvs = math.sqrt(sum(a.ppv_mm_s**2 for a in axes))
    return SeismicEvent(
        "pit1",
        "s1",
        "ev1",
        TS,
        10.0,
        axes,
        pvs,
        airblast_pa,
        mic_low_hz,
        "M" in clipped,
        source,
        "Smith house",
    )


def judge(key: str, ev: SeismicEvent, profile=DOVRE, blasts=()):  # type: ignore[no-untyped-def]
    return run(
        key,
        SiteData(seismic=(ev,), blasts=blasts),
        TS - timedelta(minutes=1),
        TS + timedelta(minutes=1),
        profile=profile,
    )


CURVES = DOVRE.params("ground_vibration").curves


# Every corner of every shipped curve, judged a hair below and above (in PPV), and at a
# frequency a hair either side of the corner (the curve's slope changes there).
def corner_cases() -> list[object]:
    cases = []
    for name, points in CURVES.items():
        for hz, ppv in points:
            cases.append(case(name, hz, ppv * 0.99, "compliant", id=f"{name}-{hz}Hz-below"))
            cases.append(case(name, hz, ppv * 1.01, "violation", id=f"{name}-{hz}Hz-above"))
    return cases


@pytest.mark.parametrize(("curve", "hz", "ppv", "expected"), corner_cases())
def test_each_side_of_each_corner(curve: str, hz: float, ppv: float, expected: str) -> None:
    profile = load_profile("dovre", {"ground_vibration.curve": curve})
    [finding] = judge("ground_vibration", event((ppv, hz)), profile)
    assert finding.kind.value == expected
    assert finding.details["curve"] == curve and curve in finding.summary
    assert finding.section == "6.F" and finding.standard == "ground_vibration"


# fmt: off
USBM_PLASTER_CASES = [
    # displacement 0.030 in below 2.65 Hz: 2 pi f 0.030
    case(2.0, 0.37, "compliant", id="2Hz-0.030in-line-0.377"),
    case(2.0, 0.39, "violation", id="2Hz-above-0.030in-line"),
    case(0.5, 0.09, "compliant", id="0.5Hz-line-extended-0.094"),
    case(0.5, 0.10, "violation", id="0.5Hz-above-extended-line"),
    case(5.0, 0.49, "compliant", id="5Hz-plateau-0.50"),
    case(5.0, 0.51, "violation", id="5Hz-above-plateau"),
    # 0.008 in displacement from 9.95 Hz: 2 pi 20 0.008 = 1.005
    case(20.0, 1.00, "compliant", id="20Hz-0.008in-line-1.005"),
    case(20.0, 1.01, "violation", id="20Hz-above-0.008in-line"),
    case(80.0, 1.99, "compliant", id="80Hz-2.0-flat"),
    case(80.0, 2.01, "violation", id="80Hz-above-2.0"),
]
# fmt: on


@pytest.mark.parametrize(("hz", "ppv", "expected"), USBM_PLASTER_CASES)
def test_dovre_default_curve_is_usbm_plaster(hz: float, ppv: float, expected: str) -> None:
    [finding] = judge("ground_vibration", event((ppv, hz)))
    assert finding.kind.value == expected


def test_curve_math_matches_the_published_lines() -> None:
    points = CURVES["usbm-ri8507-drywall"]
    assert limit_at(points, 2.0) == pytest.approx(2 * math.pi * 2.0 * 0.030, rel=1e-3)
    assert limit_at(points, 25.0) == pytest.approx(2 * math.pi * 25.0 * 0.008, rel=2e-3)
    assert limit_at(points, 10.0) == 0.75
    assert limit_at(CURVES["rhode-island"], 20.0) == pytest.approx(0.05 * 20.0)
    assert limit_at(CURVES["rhode-island"], 1.0) == 0.5


def test_finding_names_each_axis_its_frequency_and_the_blast() -> None:
    ev = event((0.3, 8.0), v=(0.9, 30.0), lo=(0.1, 12.0))  # V: 0.9 in/s at 30 Hz, limit 1.508
    [finding] = judge("ground_vibration", ev, blasts=(blast(TS - timedelta(seconds=2)),))
    assert finding.kind.value == "compliant"
    assert [r["axis"] for r in finding.details["axes"]] == ["T", "V", "L"]
    assert finding.details["axes"][1]["limit"] == pytest.approx(2 * math.pi * 30 * 0.008, rel=2e-3)
    assert finding.refs == ("seismic:s1:ev1", "blast:b1")
    assert "blast b1" in finding.summary and "Smith house" in finding.summary
    over = event((0.3, 8.0), v=(0.6, 6.0))
    [violation] = judge("ground_vibration", over)
    assert violation.kind.value == "violation" and "axis V" in violation.summary
    assert "no blast record" in violation.summary


def test_clipped_channel_within_the_curve_is_unreliable_above_it_a_violation() -> None:
    [finding] = judge("ground_vibration", event((0.2, 8.0), clipped="T"))
    assert finding.kind.value == "unreliable" and "clipped" in finding.summary
    [finding] = judge("ground_vibration", event((0.8, 8.0), clipped="T"))
    assert finding.kind.value == "violation"


def test_an_edge_summary_says_so() -> None:
    [finding] = judge("ground_vibration", event((0.2, 8.0), source="edge"))
    assert "seismograph's own summary" in finding.summary and finding.details["source"] == "edge"


# fmt: off
AIRBLAST_CASES = [
    case(0.1, 133.9, "compliant", id="0.1Hz-system-134"),
    case(0.1, 134.1, "violation", id="0.1Hz-system-above-134"),
    case(2.0, 132.9, "compliant", id="2Hz-system-133"),
    case(2.0, 133.1, "violation", id="2Hz-system-above-133"),
    case(1.0, 133.1, "violation", id="1Hz-system-judged-on-the-2Hz-row"),
    case(0.05, 133.9, "compliant", id="0.05Hz-system-on-the-0.1Hz-row"),
    case(6.0, 128.9, "compliant", id="6Hz-system-129"),
    case(6.0, 129.1, "violation", id="6Hz-system-above-129"),
    case(10.0, 140.0, "info", id="10Hz-sound-meter-is-an-indication-only"),
]
# fmt: on


@pytest.mark.parametrize(("mic_low_hz", "db", "expected"), AIRBLAST_CASES)
def test_airblast_limit_by_the_microphones_low_frequency_limit(
    mic_low_hz: float, db: float, expected: str
) -> None:
    pa = 20e-6 * 10 ** (db / 20)
    [finding] = judge("airblast", event((0.1, 10.0), airblast_pa=pa, mic_low_hz=mic_low_hz))
    assert finding.kind.value == expected
    assert finding.measurements[0].value == pytest.approx(db, abs=0.01)


def test_airblast_table_reading() -> None:
    limits = DOVRE.params("airblast").limits_db
    assert airblast_limit(limits, 2.0) == (2.0, 133.0)
    assert airblast_limit(limits, 7.0) is None
    assert airblast_limit(limits, None) is None


def _dovre_with(standard: str, param: str, value: object) -> None:
    raw = tomllib.loads((REPO / "rules" / "profiles" / "dovre.toml").read_text(encoding="utf-8"))
    raw["standards"][standard]["params"][param] = value
    build_profile(raw, source="dovre-edited")


@pytest.mark.parametrize(
    ("standard", "param", "value", "message"),
    [
        (
            "ground_vibration",
            "curve",
            "nope",
            "standards.ground_vibration.params.curve: 'nope' is not one of curves",
        ),
        (
            "ground_vibration",
            "units",
            "ft/s",
            "standards.ground_vibration.params.units: must be one of in/s, mm/s",
        ),
        (
            "ground_vibration",
            "curves",
            {"usbm-ri8507-plaster": [[10.0, 1.0], [5.0, 2.0]]},
            "frequencies must increase",
        ),
        ("ground_vibration", "curves", {"x": [[10.0, "a"]]}, r"params.curves.x\[0\]\[1\]: expected a number"),
        (
            "airblast",
            "limits_db",
            {"low": 133.0},
            "standards.airblast.params.limits_db: 'low' is not a frequency",
        ),
    ],
)
def test_bad_curve_data_is_one_line_naming_the_field(
    standard: str, param: str, value: object, message: str
) -> None:
    with pytest.raises(ProfileError, match=message):
        _dovre_with(standard, param, value)


def test_an_agreement_may_choose_another_curve_by_name() -> None:
    with pytest.raises(ProfileError, match=r"ground_vibration\.curve: 'nope' is not one of curves"):
        load_profile("dovre", {"ground_vibration.curve": "nope"})
    assert (
        load_profile("dovre", {"ground_vibration.curve": "rhode-island"}).params("ground_vibration").curve
        == "rhode-island"
    )


def test_preexisting_sites_are_spared_as_for_overpressure() -> None:
    names = {s.key for s in DOVRE.enabled_for(preexisting=True)}
    assert "ground_vibration" not in names and "airblast" not in names


def _c_weighted(dbc: float, mic_low_hz: float | None = 2.0, db: float = 120.0) -> SeismicEvent:
    return replace(
        event((0.1, 10.0), airblast_pa=20e-6 * 10 ** (db / 20), mic_low_hz=mic_low_hz), airblast_dbc_slow=dbc
    )


def _profile_with_instrument(instrument: str) -> object:
    raw = tomllib.loads((REPO / "rules" / "profiles" / "dovre.toml").read_text(encoding="utf-8"))
    raw["standards"]["airblast"]["params"]["instrument"] = instrument
    return build_profile(raw, source=f"dovre-{instrument}")


# fmt: off
C_SLOW_CASES = [
    # a C-weighted instrument (the profile says so): 105 dB(C) slow, each side; the linear peak is not judged
    case("c-slow", 2.0, 104.9, 140.0, "compliant", id="c-slow-104.9-within"),
    case("c-slow", 2.0, 105.1, 120.0, "violation", id="c-slow-105.1-above"),
    # a linear microphone flat to no row (a sound meter, 10 Hz): the C-weighted slow level, each side
    case("linear", 10.0, 104.9, 140.0, "compliant", id="10Hz-judged-on-c-slow-within"),
    case("linear", 10.0, 105.1, 120.0, "violation", id="10Hz-judged-on-c-slow-above"),
    # a linear microphone flat to 2 Hz: the linear table, whatever the C-weighted level
    case("linear", 2.0, 110.0, 132.9, "compliant", id="2Hz-linear-row-not-c-slow"),
]
# fmt: on


@pytest.mark.parametrize(("instrument", "mic_low_hz", "dbc", "db", "expected"), C_SLOW_CASES)
def test_the_105_dbc_slow_limit_when_the_profile_or_the_instrument_calls_for_it(
    instrument: str, mic_low_hz: float, dbc: float, db: float, expected: str
) -> None:
    profile = _profile_with_instrument(instrument)
    [finding] = judge("airblast", _c_weighted(dbc, mic_low_hz, db), profile=profile)
    assert finding.kind.value == expected
    [measured] = finding.measurements
    if instrument == "c-slow" or mic_low_hz > 6.0:
        assert (measured.name, measured.value, measured.limit, measured.unit) == (
            "airblast (C-weighted slow)",
            dbc,
            105.0,
            "dB(C)",
        )
        assert (
            f"{dbc:.1f} dB(C)" in finding.summary
            and "105 dB(C) limit for a C-weighted system" in finding.summary
        )
        assert finding.details["judged_on"] == "c-slow"
    else:
        assert (measured.value, measured.limit) == (pytest.approx(db, abs=0.01), 133.0)
        assert finding.details["judged_on"] == "linear"


def test_c_slow_without_a_c_weighted_level_is_an_indication() -> None:
    ev = event((0.1, 10.0), airblast_pa=20.0, mic_low_hz=2.0)  # a vendor summary: no dB(C)
    [finding] = judge("airblast", ev, profile=_profile_with_instrument("c-slow"))
    assert finding.kind.value == "info" and "carries no C-weighted level" in finding.summary


def test_instrument_must_be_named_and_c_slow_needs_its_limit() -> None:
    with pytest.raises(
        ProfileError, match=r"standards\.airblast\.params\.instrument: 'C' is not one of linear, c-slow"
    ):
        _dovre_with("airblast", "instrument", "C")
    raw = tomllib.loads((REPO / "rules" / "profiles" / "dovre.toml").read_text(encoding="utf-8"))
    del raw["standards"]["airblast"]["params"]["c_slow_limit_db"]
    raw["standards"]["airblast"]["params"]["instrument"] = "c-slow"
    with pytest.raises(ProfileError, match='c_slow_limit_db: instrument = "c-slow" needs'):
        build_profile(raw, source="dovre-edited")
