"""Profiles: the ordinance as data, overrides from operations agreements (4.1), errors with paths."""

from __future__ import annotations

from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from rules import RULES, data_margins, evaluate_site
from rules.model import SiteData
from rules.profile import Profile, ProfileError, available_profiles, build_profile, load_profile
from tests.support.paths import DATA
from tests.support.rule_builders import DOVRE, SITE, at, blast, kinds, make_site, notice, run, seconds

OTHERTON_PATH = str(Path(__file__).parent / "profiles" / "otherton.toml")
OTHERTON = load_profile(OTHERTON_PATH)
case = pytest.param


def test_dovre_profile_describes_the_ordinance() -> None:
    assert "dovre" in available_profiles()
    assert DOVRE.title == "Town of Dovre nonmetallic mining ordinance"
    assert DOVRE.notice_prefix == "DOV" and DOVRE.cure_days == 14 and DOVRE.cure_section == "13.3.A"
    sections = {key: s.section for key, s in DOVRE.standards.items()}
    assert sections["noise"] == "6.D" and sections["conveyor_noise"] == "6.G"
    assert sections["blast_window"] == sections["blast_notice"] == "6.F"
    assert sections["light_trespass"] == "6.C.2" and sections["temporary_lighting"] == "6.C.6"
    noise = DOVRE.standard("noise")
    assert noise.text.startswith("The Operator shall use best management practices to keep noise")
    assert noise.required_action and noise.summary and noise.title
    # Every rule kind is exercised by a shipped profile (the land-disturbing ones by its own).
    land = {s.rule for s in load_profile("land-disturbing").standards.values()}
    assert {s.rule for s in DOVRE.standards.values()} | land == set(RULES)


def test_a_verdict_on_one_event_is_the_rules_whatever_the_profile_names_its_standard() -> None:
    """The blasting-hours rule says each of its findings judges one blast (RuleSpec.verdict_on);
    a profile's standard of that rule is such a verdict under any key, and no other is."""
    assert DOVRE.event_verdicts() == {"blast_window": "blast"}
    assert OTHERTON.event_verdicts() == {"blasting_hours": "blast"}
    assert [name for name, rule in RULES.items() if rule.verdict_on] == ["blast_window"]


def test_margins_cover_what_the_rules_need() -> None:
    lookback, lookahead = data_margins(DOVRE)
    assert lookback == timedelta(hours=72)  # upward light's night baseline
    assert lookahead >= timedelta(seconds=30)  # unreported blast background after the impulse
    assert data_margins(DOVRE, "sound") == (timedelta(seconds=60), timedelta(seconds=60))
    assert data_margins(DOVRE, "light") == (timedelta(hours=72), timedelta(0))
    assert data_margins(DOVRE, "weather") == (timedelta(seconds=60), timedelta(seconds=60))


# fmt: off
OVERRIDES_CASES = [
    case({"noise.limit_db": 85}, 85.0, id="4.1-flat-key"),
    case({"noise": {"limit_db": 85.5}}, 85.5, id="4.1-nested-table"),
    case({}, 80.0, id="4.1-no-agreement"),
]
# fmt: on


@pytest.mark.parametrize(("overrides", "limit"), OVERRIDES_CASES)
def test_overrides(overrides: dict[str, Any], limit: float) -> None:
    assert load_profile("dovre", overrides).params("noise").limit_db == limit


def test_override_of_haul_hours_and_episode_gap() -> None:
    profile = load_profile("dovre", {"haul_hours.windows": ["06:00-19:00"], "episode_gap_s": 120})
    assert profile.params("haul_hours").windows == ("06:00-19:00",)
    assert profile.episode_gap_s == 120.0


LATE_START = {"blast_window.window_start": "16:00"}
WINDOW_ORDER = "standards.blast_window.params.window_end"

# fmt: off
OVERRIDE_ERRORS_CASES = [
    case({"noise.limit_db": "loud"}, "noise.limit_db", "expected a number, got 'loud'", id="4.1-wrong-type"),
    case({"noise.limit_db": True}, "noise.limit_db", "expected a number, got True", id="4.1-bool"),
    case({"noise.limit_dbb": 85}, "noise.limit_dbb", "unknown key;", id="4.1-unknown-param"),
    case({"nosie.limit_db": 85}, "nosie.limit_db", "unknown key;", id="4.1-unknown-standard"),
    case({"noise": {"metric": "LAmax"}}, "noise.metric", "expected one of LAeq, LASmax", id="4.1-bad-choice"),
    case({"haul_hours.windows": ["6am-7pm"]}, "haul_hours.windows", "expected a local", id="5.A.6-window"),
    case(LATE_START, WINDOW_ORDER, "must be later than window_start", id="6.F-window-order"),
]
# fmt: on


@pytest.mark.parametrize(("overrides", "path", "reason"), OVERRIDE_ERRORS_CASES)
def test_override_errors(overrides: dict[str, Any], path: str, reason: str) -> None:
    problem = f"{path}: {reason}"
    with pytest.raises(ProfileError) as caught:
        load_profile("dovre", overrides)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def minimal(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "t",
        "title": "T",
        "authority": "Town of T",
        "notice_prefix": "T",
        "standards": {
            "noise": {
                "rule": "noise",
                "section": "1",
                "title": "x",
                "summary": "x",
                "text": "x",
                "required_action": "x",
                "params": {"limit_db": 70},
            }
        },
    }
    for path, value in changes.items():
        target = raw
        *parents, last = path.split("__")
        for part in parents:
            target = target[part]
        target[last] = value
    return raw


KNOWN = (
    "unknown rule 'nosie'; known rules: air_overpressure, airblast, area_controls, blast_notice, blast_window"
)
NOISE_PARAMS = "standards.noise.params"

# fmt: off
PROFILE_ERRORS_CASES = [
    case("standards.noise.rule", "nosie", KNOWN, id="profile-unknown-rule-lists-known-rules"),
    case(f"{NOISE_PARAMS}.limit_db", "loud", "expected a number, got 'loud'", id="profile-wrong-type"),
    case(f"{NOISE_PARAMS}.limt_db", 3, "unknown key", id="profile-unknown-param"),
    case("standards.noise.colour", "red", "unknown key", id="profile-unknown-standard-field"),
    case("cure_dayz", 14, "unknown key", id="profile-unknown-top-level-key"),
    case("cure_days", "fourteen", "expected a whole number", id="profile-13.3.A-cure-days"),
    case("cure_remind_days", -1, "must be at least 0 days, got -1",
         id="profile-remind-days-negative"),
    case("cure_remind_days", 2.5, "expected a whole number", id="profile-remind-days-fraction"),
    case("cure_days", -3, "must be at least 1, got -3", id="cure-negative"),
    case("cure_days", 10**9, "must be at most 3650, got 1000000000", id="cure-past-calendar"),
    case("episode_gap_s", 1e300, "must be at most 604800 s, got 1e+300", id="profile-gap-huge"),
    case(f"{NOISE_PARAMS}.placements", "boundary", "expected a list", id="profile-list-expected"),
    case("preexisting_exempt", ["lighting"], "'lighting' is not a standard", id="profile-1.4.C"),
    case("preexisting_section", 1.4, "expected a string, got 1.4", id="profile-preexisting-section-not-text"),
    case("cure_next_business_day_source", True, "expected a string, got True",
         id="profile-next-business-day-source-not-text"),
    # TOML's nan passes every comparison: a limit of nan (or inf) would never be exceeded
    case(f"{NOISE_PARAMS}.limit_db", float("nan"), "expected a finite number, got nan", id="profile-nan"),
    case(f"{NOISE_PARAMS}.limit_db", float("inf"), "expected a finite number, got inf", id="profile-inf"),
]
# fmt: on


@pytest.mark.parametrize(("path", "value", "reason"), PROFILE_ERRORS_CASES)
def test_profile_errors(path: str, value: Any, reason: str) -> None:
    problem = f"{path}: {reason}"
    with pytest.raises(ProfileError) as caught:
        build_profile(minimal(**{path.replace(".", "__"): value}), source="test")
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems
    assert problem.split(":")[0] in str(caught.value)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("dovre", {"noise.limit_db": "loud", "noise.metric": 3, "blast_window.nope": 1})
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize("given", ["/tmp", "dovre.txt", "../dovre", ""])
def test_a_path_that_is_no_toml_is_no_profile_name(given: str) -> None:
    """`profile = "/tmp"` said "unknown profile", and a name was joined to the package's folder
    as given, so "/tmp" read /tmp.toml had it existed."""
    with pytest.raises(ProfileError) as caught:
        load_profile(given)
    assert caught.value.problems == [
        f"profile: {given!r} is neither a shipped profile (dovre, land-disturbing) nor a .toml file's path"
    ]


def test_unknown_profile_name_lists_available() -> None:
    with pytest.raises(ProfileError, match=r"available: .*dovre"):
        load_profile("atlantis")


# --- the second town runs through the same rules with no code change ---

MINUTE = at("2026-06-15 11:31")


# fmt: off
SECOND_PROFILE_NOISE_CASES = [
    case(77.0, OTHERTON, ["violation"], id="otherton-§12-4(b)-77-over-75"),
    case(77.0, DOVRE, [], id="dovre-6.D-77-under-80"),
]
# fmt: on


@pytest.mark.parametrize(("level", "profile", "expected"), SECOND_PROFILE_NOISE_CASES)
def test_second_profile_noise(level: float, profile: Profile, expected: list[str]) -> None:
    data = SiteData(sound=tuple(seconds("n1", MINUTE, 60, level)))
    findings = evaluate_site(SITE, profile, data, MINUTE, MINUTE + timedelta(minutes=1), MINUTE)
    assert kinds(findings) == expected
    if findings:
        assert findings[0].section == "§ 12-4(b)" and findings[0].standard == "sound"
        assert "above the 75 dB limit (§ 12-4(b))" in findings[0].summary


# fmt: off
SECOND_PROFILE_BLASTING_CASES = [
    case("2026-06-15 08:30", None, "compliant", "violation", id="otherton-§12-7(a)-08:30"),
    case("2026-06-15 16:30", None, "compliant", "violation", id="otherton-§12-7(a)-16:30"),
    case("2026-06-15 17:30", "rock fall", "violation", "safety_exception", id="otherton-§12-7(a)-17:30"),
]
# fmt: on


@pytest.mark.parametrize(("local_time", "reason", "otherton", "dovre"), SECOND_PROFILE_BLASTING_CASES)
def test_second_profile_blasting(local_time: str, reason: str | None, otherton: str, dovre: str) -> None:
    ts = at(local_time)
    data = SiteData(blasts=(blast(ts, reason=reason),))
    key_other = "blasting_hours"
    assert kinds(run(key_other, data, ts, ts + timedelta(seconds=1), profile=OTHERTON)) == [otherton]
    assert kinds(run("blast_window", data, ts, ts + timedelta(seconds=1))) == [dovre]
    assert OTHERTON.standard(key_other).section == "§ 12-7(a)"


def test_second_profile_spares_preexisting_sites_its_notice_rule() -> None:
    ts = at("2026-06-15 11:00")
    data = SiteData(blasts=(blast(ts),), blast_notices=(notice("b1", ts - timedelta(hours=30), ts),))
    new_site = evaluate_site(SITE, OTHERTON, data, ts, ts + timedelta(minutes=1), ts)
    old_site = evaluate_site(make_site(preexisting=True), OTHERTON, data, ts, ts + timedelta(minutes=1), ts)
    assert {(f.standard, f.kind.value) for f in new_site} == {
        ("blasting_hours", "compliant"),
        ("blast_notice", "violation"),
    }
    assert {(f.standard, f.kind.value) for f in old_site} == {("blasting_hours", "compliant")}


# --- 1.4.C.1: which standards bind pre-existing operations (the Town's reading, default below) ---

QUOTED_1_4_C_1 = (
    '"However, as of the effective date of this Ordinance, pre-existing operations shall only be '
    "subject to the standards governing noise, light dispersal, blasting time limitations and property "
    'value guarantees."'
)

# fmt: off
PREEXISTING_SCOPE_CASES = [
    case("noise", True, id="1.4.C.1-noise"),
    case("conveyor_noise", True, id="1.4.C.1-conveyor-noise"),
    case("light_trespass", True, id="1.4.C.1-light-dispersal-trespass"),
    case("flashing_light", True, id="1.4.C.1-light-dispersal-flashing"),
    case("high_intensity_light", True, id="1.4.C.1-light-dispersal-high-intensity"),
    case("upward_light", True, id="1.4.C.1-light-dispersal-upward"),
    case("temporary_lighting", True, id="1.4.C.1-light-dispersal-temporary"),
    case("blast_window", True, id="1.4.C.1-blasting-time-limitations"),
    case("blast_notice", True, id="1.4.C.1-24h-notice-read-as-time-limitation"),
    case("unreported_blast", True, id="1.4.C.1-unreported-blast-shows-the-hours"),
    case("blast_overpressure", False, id="1.4.C.1-SPS307-overpressure-not-a-time-limitation"),
    case("haul_hours", True, id="1.4.C.3-town-highways-section-5"),
]
# fmt: on


@pytest.mark.parametrize(("key", "applies"), PREEXISTING_SCOPE_CASES)
def test_dovre_scope_for_preexisting_sites(key: str, applies: bool) -> None:
    assert DOVRE.standard(key).applies_to_preexisting is applies
    assert (key in {s.key for s in DOVRE.enabled_for(preexisting=True)}) is applies
    assert key in {s.key for s in DOVRE.enabled_for(preexisting=False)}


def test_dovre_profile_quotes_1_4_C_1_and_lists_its_reading() -> None:
    text = resources.files("rules.profiles").joinpath("dovre.toml").read_text(encoding="utf-8")
    comments = " ".join(line.strip().lstrip("#").strip() for line in text.splitlines())
    assert QUOTED_1_4_C_1 in comments
    assert any("1.4.C.1" in c for c in DOVRE.standard("blast_overpressure").considered)


def test_preexisting_site_is_held_to_blasting_hours_and_notice_not_overpressure() -> None:
    ts = at("2026-06-15 16:00")
    data = SiteData(
        blasts=(blast(ts, overpressure_db=136.0),),
        blast_notices=(notice("b1", ts - timedelta(hours=2), ts),),
    )
    end = ts + timedelta(minutes=1)
    new = {(f.standard, f.kind.value) for f in evaluate_site(SITE, DOVRE, data, ts, end, end)}
    old_site = make_site(preexisting=True)
    old = {(f.standard, f.kind.value) for f in evaluate_site(old_site, DOVRE, data, ts, end, end)}
    held = {("blast_window", "violation"), ("blast_notice", "violation")}
    assert old == held
    assert new == held | {("blast_overpressure", "violation")}


# --- "considered": the project's readings, listed in the profile and carried by every finding ---


def test_findings_carry_their_standard_considered_readings() -> None:
    ts = at("2026-06-15 16:00")
    [finding] = run("blast_window", SiteData(blasts=(blast(ts),)), ts, ts + timedelta(seconds=1))
    assert finding.details["considered"] == list(DOVRE.standard("blast_window").considered)
    assert any("after midnight" in c for c in finding.details["considered"])


def test_each_choice_is_listed_with_its_own_standard_only() -> None:
    """A notice lists its own standard's choices (issue 25): weather under the noise standards,
    night under the lighting ones, and nothing profile-wide that every notice would repeat."""
    assert DOVRE.considered == ()
    for key in ("noise", "conveyor_noise"):
        text = " ".join(DOVRE.standard(key).considered)
        assert "unreliable" in text and "the ordinance says nothing about weather" in text
        assert "night" not in text
    for key in ("light_trespass", "flashing_light", "high_intensity_light", "upward_light"):
        considered = DOVRE.standard(key).considered
        assert sum("the ordinance names no time of day" in c for c in considered) == 1, key
        assert not any("weather" in c for c in considered), key


# fmt: off
CONSIDERED_ERRORS_CASES = [
    case("considered", "wind", "considered: expected a list", id="profile-considered-not-a-list"),
    case("standards.noise.considered", [3], "standards.noise.considered[0]: expected a string",
         id="profile-standard-considered-not-strings"),
]
# fmt: on


@pytest.mark.parametrize(("path", "value", "problem"), CONSIDERED_ERRORS_CASES)
def test_considered_errors(path: str, value: Any, problem: str) -> None:
    with pytest.raises(ProfileError) as caught:
        build_profile(minimal(**{path.replace(".", "__"): value}), source="test")
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


# ------------------------------------------------------------------------ [notice]: consequence and sources


def test_dovre_notice_terms_name_the_source_of_every_limit() -> None:
    profile = load_profile("dovre")
    terms = profile.notice
    assert terms.consequence_section == "13.3.B" and "Town Citation Ordinance" in terms.consequence
    # The supplied section 13 stops after 13.3.B: it names no hearing or appeal, which is no proof
    # that there is none, so the profile states neither one nor a source saying there is none.
    assert terms.hearing == "" and terms.no_hearing_source == ""
    # Where the ordinance gives no number, the profile says the Town set it.
    assert terms.sources["light_trespass"] == {"limit_lux": "profile", "min_duration_s": "profile"}
    assert terms.sources["noise"]["limit_db"] == "6.D"
    # Every limit param a notice's measurements are judged against has a source.
    for key, param in [
        ("noise", "limit_db"),
        ("conveyor_noise", "limit_db"),
        ("flashing_light", "min_duration_s"),
        ("high_intensity_light", "max_lux"),
        ("blast_overpressure", "limit_db"),
        ("blast_notice", "min_notice_h"),
        ("temporary_lighting", "max_days_per_year"),
    ]:
        assert param in terms.sources[key], (key, param)


def test_notice_terms_mistakes_are_reported_by_path() -> None:
    raw = {
        "name": "x",
        "title": "x",
        "authority": "x",
        "notice_prefix": "X",
        "standards": {
            "noise": {
                "rule": "noise",
                "section": "1",
                "title": "t",
                "summary": "s",
                "text": "t",
                "required_action": "r",
            }
        },
        "notice": {
            "consequence": 5,
            "appeal": "x",
            "sources": {"noise": {"limit_db": "", "loudness": "1"}, "dust": {"limit": "1"}},
        },
    }
    with pytest.raises(ProfileError) as info:
        build_profile(raw)
    problems = "\n".join(info.value.problems)
    assert "notice.consequence: expected a string, got 5" in problems
    assert "notice.appeal: unknown key" in problems
    assert "notice.sources.noise.limit_db: expected a section" in problems
    assert "notice.sources.noise.loudness: not a param of 'noise'" in problems
    assert "notice.sources.dust: 'dust' is not a standard of this profile" in problems


def test_a_profile_cannot_state_a_hearing_and_a_source_saying_there_is_none() -> None:
    raw = minimal(notice={"hearing": "Appeal to the Town Board.", "no_hearing_source": "13.4"})
    with pytest.raises(ProfileError) as info:
        build_profile(raw)
    assert "notice.no_hearing_source: the profile also states a hearing or appeal (notice.hearing)" in (
        info.value.problems
    )


def test_the_episode_gap_reads_without_building_the_profile() -> None:
    """`minewatch status` reads the gap so (it loads no rule module): the same number as the profile's."""
    from rules.profile import episode_gap_of

    assert episode_gap_of("dovre") == DOVRE.episode_gap_s == 300.0
    assert (
        episode_gap_of("dovre", {"episode_gap_s": 120})
        == load_profile("dovre", {"episode_gap_s": 120}).episode_gap_s
    )
    with pytest.raises(ProfileError):
        episode_gap_of("no-such-town")


def test_standard_titles_read_without_building_the_profile() -> None:
    from rules.profile import standard_titles_of

    assert standard_titles_of("dovre") == {k: s.title for k, s in DOVRE.standards.items()}


# Where a surface cites a section or a law the profile does not name among its standards, the
# profile says it: Dovre's values; a profile silent on them (Fernhill) cites none.
@pytest.mark.parametrize(
    ("name", "preexisting", "rolled"),
    [
        case("dovre", "1.4.C", "Wis. Stat. 990.001(4)", id="dovre"),
        case(str(DATA / "profiles" / "fernhill.toml"), "", "", id="fernhill-names-none"),
    ],
)
def test_the_profile_names_the_sections_its_texts_cite(name: str, preexisting: str, rolled: str) -> None:
    profile = load_profile(name)
    assert profile.preexisting_section == preexisting
    assert profile.cure_next_business_day_source == rolled
