"""Blasting: hours and sunset (6.F), notice (6.F), air overpressure (6.F / SPS 307), unreported blasts."""

from __future__ import annotations

import dataclasses
import math
import random
import re
from datetime import datetime, timedelta

import pytest

from rules.model import AdjoiningOwner, BlastNotice, Finding, SiteContext, SiteData, SoundLevels, TownContact
from rules.profile import ProfileError, load_profile
from rules.unreported_blast import UnreportedBlastParams, find_impulse
from tests.support.paths import DATA
from tests.support.rule_builders import (
    DOVRE,
    SITE,
    TROMSO,
    at,
    blast,
    kinds,
    make_site,
    notice,
    run,
    seconds,
    with_overrides,
)

SAFETY = "misfire had to be cleared before dark"
V, OK, SX = "violation", "compliant", "safety_exception"
case = pytest.param


def judge(
    ts_local: str, reason: str | None = None, site: SiteContext = SITE, tz: str = "America/Chicago"
) -> Finding:
    ts = at(ts_local, tz)
    data = SiteData(blasts=(blast(ts, reason=reason, site=site.id),))
    [finding] = run("blast_window", data, ts, ts + timedelta(seconds=1), site=site)
    return finding


# fmt: off
BLAST_WINDOW_DOVRE_CASES = [
    case("2026-06-15 09:59:59", None, V, id="6.F-09:59:59-before-window"),
    case("2026-06-15 09:59:59", SAFETY, V, id="6.F-09:59:59-safety-reason-does-not-help-before-10"),
    case("2026-06-15 10:00:00", None, OK, id="6.F-10:00:00-window-opens-inclusive"),
    case("2026-06-15 15:00:00", None, OK, id="6.F-15:00:00-window-closes-inclusive"),
    case("2026-06-15 15:00:01", None, V, id="6.F-15:00:01-no-safety-reason"),
    case("2026-06-15 15:00:01", SAFETY, SX, id="6.F-15:00:01-safety-reason"),
    case("2026-06-15 15:00:01", "   ", V, id="6.F-15:00:01-blank-reason"),
    case("2026-06-15 15:00:01", "n/a", V, id="6.F-15:00:01-placeholder-n/a-is-no-reason"),
    case("2026-06-15 15:00:01", " None. ", V, id="6.F-15:00:01-placeholder-none-is-no-reason"),
    case("2026-06-15 15:00:01", "-", V, id="6.F-15:00:01-punctuation-is-no-reason"),
    case("2026-06-15 15:00:01", "crew ran late", SX, id="6.F-15:00:01-any-words-are-the-Towns-to-review"),
    case("2026-06-15 20:55:00", SAFETY, SX, id="6.F-just-before-sunset-20:55:53"),
    case("2026-06-15 20:56:00", SAFETY, V, id="6.F-after-sunset-with-safety-reason"),
    case("2026-06-15 23:30:00", SAFETY, V, id="6.F-night-with-safety-reason"),
]
# fmt: on


@pytest.mark.parametrize(("local_time", "reason", "expected"), BLAST_WINDOW_DOVRE_CASES)
def test_blast_window_dovre(local_time: str, reason: str | None, expected: str) -> None:
    finding = judge(local_time, reason)
    assert finding.kind.value == expected
    assert finding.section == "6.F" and finding.standard == "blast_window"
    assert finding.refs == ("blast:b1",)
    assert "(section 6.F)" in finding.summary


# Spring forward: sunset 19:03 CDT (a CST clock would say 18:03). Fall back: 16:53 CST (not 17:53).
# fmt: off
BLAST_WINDOW_ON_DAYLIGHT_SAVING_DAYS_CASES = [
    case("2026-03-08 18:55", SAFETY, SX, "2026-03-08T19:03", id="6.F-DST-start-before-sunset"),
    case("2026-03-08 19:04", SAFETY, V, "2026-03-08T19:03", id="6.F-DST-start-after-sunset"),
    case("2026-03-08 10:00", None, OK, "2026-03-08T19:03", id="6.F-DST-start-10:00-local"),
    case("2026-11-01 16:50", SAFETY, SX, "2026-11-01T16:53", id="6.F-DST-end-before-sunset"),
    case("2026-11-01 17:30", SAFETY, V, "2026-11-01T16:53", id="6.F-DST-end-after-sunset"),
    case("2026-11-01 09:59", None, V, "2026-11-01T16:53", id="6.F-DST-end-09:59-local"),
]
# fmt: on


@pytest.mark.parametrize(
    ("local_time", "reason", "expected", "sunset"), BLAST_WINDOW_ON_DAYLIGHT_SAVING_DAYS_CASES
)
def test_blast_window_on_daylight_saving_days(
    local_time: str, reason: str | None, expected: str, sunset: str
) -> None:
    finding = judge(local_time, reason)
    assert finding.kind.value == expected
    assert finding.details["sunset_local"].startswith(sunset)
    assert finding.details["sun_case"] == "normal"


POLAR_DAY, POLAR_NIGHT = "sun does not set (polar day)", "sun does not rise (polar night)"


# fmt: off
BLAST_WINDOW_POLAR_CASES = [
    case("2026-06-15 22:00", SAFETY, SX, POLAR_DAY, id="6.F-Tromso-June-late-with-safety-reason"),
    case("2026-06-15 23:59:59", SAFETY, SX, POLAR_DAY, id="6.F-Tromso-June-just-before-midnight"),
    case("2026-06-15 16:00", None, V, POLAR_DAY, id="6.F-Tromso-June-late-no-reason"),
    case("2026-06-15 12:00", None, OK, POLAR_DAY, id="6.F-Tromso-June-in-window"),
    case("2026-12-15 15:30", SAFETY, V, POLAR_NIGHT, id="6.F-Tromso-December-no-daylight-for-exception"),
    case("2026-12-15 12:00", None, OK, POLAR_NIGHT, id="6.F-Tromso-December-in-window"),
]
# fmt: on


def test_a_placeholder_reason_is_quoted_as_no_reason() -> None:
    finding = judge("2026-06-15 16:00:00", "n/a")
    assert "without a safety reason ('n/a' gives none)" in finding.summary


def test_a_fraction_of_a_second_past_the_window_is_shown() -> None:
    """15:00:00.000 and 15:00:00.500 both read "15:00:00", one compliant and one "after 15:00"."""
    on_the_hour = judge("2026-06-15 15:00:00")
    just_after = run_blast(at("2026-06-15 15:00:00") + timedelta(milliseconds=500))
    assert "went off at 15:00:00 local" in on_the_hour.summary and on_the_hour.kind.value == OK
    assert "went off at 15:00:00.5 local" in just_after.summary and just_after.kind.value == V


def run_blast(ts: datetime) -> Finding:
    [finding] = run("blast_window", SiteData(blasts=(blast(ts),)), ts, ts + timedelta(seconds=1))
    return finding


@pytest.mark.parametrize(("local_time", "reason", "expected", "words"), BLAST_WINDOW_POLAR_CASES)
def test_blast_window_polar(local_time: str, reason: str | None, expected: str, words: str) -> None:
    finding = judge(local_time, reason, site=TROMSO, tz="Europe/Oslo")
    assert finding.kind.value == expected
    assert finding.details["sun"] == words
    assert finding.details["sun_case"] == ("polar_day" if words == POLAR_DAY else "polar_night")
    if expected != OK:
        assert words in finding.summary


BLAST_AT = at("2026-06-15 11:00")


# fmt: off
BLAST_NOTICE_CASES = [
    case(timedelta(hours=23, minutes=59), V, id="6.F-notice-23h59-before-is-late"),
    case(timedelta(hours=24), OK, id="6.F-notice-exactly-24h-before"),
    case(timedelta(days=3), OK, id="6.F-notice-3-days-before"),
    case(-timedelta(minutes=5), V, id="6.F-notice-after-the-blast"),
    case(None, V, id="6.F-no-notice"),
]
# fmt: on


@pytest.mark.parametrize(("issued_before", "expected"), BLAST_NOTICE_CASES)
def test_blast_notice(issued_before: timedelta | None, expected: str) -> None:
    notices = () if issued_before is None else (notice("b1", BLAST_AT - issued_before, BLAST_AT),)
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=notices)
    findings = run("blast_notice", data, BLAST_AT, BLAST_AT + timedelta(minutes=1))
    assert kinds(findings) == [expected]
    assert findings[0].section == "6.F" and findings[0].standard == "blast_notice"


def test_notice_for_another_blast_does_not_count() -> None:
    other = notice("b2", BLAST_AT - timedelta(days=2), BLAST_AT)
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=(other,))
    findings = run("blast_notice", data, BLAST_AT, BLAST_AT + timedelta(minutes=1))
    assert kinds(findings) == [V]
    assert "no recorded notice" in findings[0].summary


# fmt: off
AIR_OVERPRESSURE_CASES = [
    case(136.0, None, 0, [V], id="6.F-SPS307-blast-record-above-133"),
    case(128.0, None, 0, [OK], id="6.F-SPS307-blast-record-within-limit"),
    case(None, 134.5, 3, [V], id="6.F-SPS307-meter-LZpeak-above-133"),
    case(120.0, 134.5, 45, [OK], id="6.F-SPS307-meter-peak-outside-window-ignored"),
    case(None, None, 0, [], id="6.F-SPS307-nothing-measured"),
]
# fmt: on


@pytest.mark.parametrize(("record_db", "meter_peak", "meter_offset_s", "expected"), AIR_OVERPRESSURE_CASES)
def test_air_overpressure(
    record_db: float | None, meter_peak: float | None, meter_offset_s: int, expected: list[str]
) -> None:
    extra = {"overpressure_db": record_db} if record_db is not None else {}
    peak_second = 10 + meter_offset_s
    sound = seconds(
        "n1",
        BLAST_AT - timedelta(seconds=10),
        70,
        60.0,
        peak=lambda i: meter_peak if i == peak_second else None,
    )
    data = SiteData(blasts=(blast(BLAST_AT, **extra),), sound=tuple(sound))  # type: ignore[arg-type]
    findings = run("blast_overpressure", data, BLAST_AT, BLAST_AT + timedelta(minutes=1))
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.section == "6.F" and finding.measurements[0].limit == 133.0
        # A meter's LZpeak in the finding is said to be a secondary indication (issue 27).
        from_meter = any(p["indication"] == "secondary" for p in finding.details["peaks"])
        assert ("LZpeak is a secondary indication" in finding.summary) == from_meter
        assert from_meter == (meter_peak is not None and meter_offset_s < 10)


IMPULSE_AT = at("2026-06-15 13:20:30")
BEFORE = IMPULSE_AT - timedelta(seconds=30)


def impulse(peak: float = 131.0) -> list[SoundLevels]:
    """A quiet 55 dB(A) background with one second peaking at ``peak`` dB (LAeq 75 in that second)."""
    return seconds(
        "n1", BEFORE, 61, lambda i: 75.0 if i == 30 else 55.0, peak=lambda i: peak if i == 30 else None
    )


SUSTAINED = seconds("n1", BEFORE, 61, 110.0, peak=lambda i: 125.0)
LOUD_15_S = seconds(
    "n1", BEFORE, 61, lambda i: 98.0 if 26 <= i <= 40 else 55.0, peak=lambda i: 131.0 if i == 30 else None
)
REPORTED_2_MIN_LATER = blast(IMPULSE_AT + timedelta(minutes=2))
REPORTED_15_MIN_EARLIER = blast(IMPULSE_AT - timedelta(minutes=15))
BREAKER = seconds("n1", BEFORE, 61, 62.0, peak=lambda i: 128.0 if i % 4 == 2 else None)


# fmt: off
UNREPORTED_BLAST_CASES = [
    case(impulse(), (), ["unreported_blast"], id="6.F-impulse-with-no-blast-record"),
    case(impulse(), (REPORTED_2_MIN_LATER,), [], id="6.F-impulse-of-a-reported-blast"),
    case(impulse(), (REPORTED_15_MIN_EARLIER,), ["unreported_blast"], id="6.F-blast-record-too-far-away"),
    case(impulse(peak=115.0), (), [], id="6.F-peak-below-threshold"),
    case(SUSTAINED, (), [], id="6.F-sustained-loud-level-is-not-a-blast"),
    case(LOUD_15_S, (), [], id="6.F-loud-for-15-seconds-is-not-an-impulse"),
    case(BREAKER, (), [], id="6.F-rock-breaker-repeating-peaks"),
]
# fmt: on


@pytest.mark.parametrize(("sound", "blasts", "expected"), UNREPORTED_BLAST_CASES)
def test_unreported_blast(sound: list[SoundLevels], blasts: tuple[object, ...], expected: list[str]) -> None:
    data = SiteData(sound=tuple(sound), blasts=blasts)  # type: ignore[arg-type]
    findings = run("unreported_blast", data, BEFORE, IMPULSE_AT + timedelta(seconds=30))
    assert kinds(findings) == expected
    for finding in findings:
        assert finding.sensors == ("n1",) and finding.start == IMPULSE_AT and finding.section == "6.F"
        assert "looks like a blast" in finding.summary
        # It opens no notice (not a VIOLATION); the finding says why, where the findings are listed.
        assert finding.kind.value == "unreported_blast"
        assert "no notice of violation: a sound alone does not show a blast or its time" in finding.summary


def test_unreported_blast_looks_at_every_second_a_peak_could_make_an_impulse_of() -> None:
    """The rule skips a minute whose peaks all stay below the threshold without a call per second
    (issue 31): its findings equal find_impulse's over every second, for minutes whose peaks sit
    at, just below and above the threshold, in LZpeak or LCpeak alone, missing, or NaN."""
    rng = random.Random(31)
    params = UnreportedBlastParams()
    threshold = params.peak_threshold_db
    choices = [None, threshold, threshold - 1e-9, threshold + 5, 70.0, math.nan]
    found_any = 0
    for _ in range(300):
        spike_at = rng.randrange(20, 41)
        lz, lc = rng.choice(choices), rng.choice(choices[1:])
        sound = [
            r._replace(LZpeak=lz, LCpeak=lc) if i == spike_at else r
            for i, r in enumerate(
                seconds("n1", BEFORE, 61, lambda i: 55.0 + rng.random(), peak=lambda i: None)
            )
        ]
        series = tuple(sound)
        expected = [
            r.ts
            for r in series
            if BEFORE <= r.ts < IMPULSE_AT + timedelta(seconds=30) and find_impulse(r, series, params)
        ]
        findings = run("unreported_blast", SiteData(sound=series), BEFORE, IMPULSE_AT + timedelta(seconds=30))
        assert [f.start for f in findings] == expected, (lz, lc)
        found_any += bool(expected)
    assert 0 < found_any < 300  # both kinds of minute were tried


FAIRBANKS = make_site("fbx", "America/Anchorage", 64.84, -147.72)
AK = "America/Anchorage"
JUNE, DEC = "2026-06-22T00:46:19", "2026-12-15T14:38:51"
NO_PAST_MIDNIGHT = with_overrides(blast_window__safety_exception_past_midnight=False)

# Fairbanks, 21 June 2026: the evening's sunset is at 00:46:19.6 AKDT on the 22nd (astral files it
# under the 22nd; the 21st's own "sunset" is the previous night's 00:46:14). 15 December: 14:38:51.
# fmt: off
BLAST_WINDOW_SUNSET_AFTER_MIDNIGHT_CASES = [
    case("2026-06-21 16:00:00", SAFETY, SX, JUNE, id="6.F-Fairbanks-16:00-sunset-after-midnight"),
    case("2026-06-21 16:00:00", None, V, JUNE, id="6.F-Fairbanks-16:00-no-reason"),
    case("2026-06-21 23:59:59", SAFETY, SX, JUNE, id="6.F-Fairbanks-23:59:59"),
    case("2026-06-22 00:46:19", SAFETY, SX, JUNE, id="6.F-Fairbanks-00:46:19-before-sunset"),
    case("2026-06-22 00:46:20", SAFETY, V, JUNE, id="6.F-Fairbanks-00:46:20-after-sunset"),
    case("2026-12-15 14:59:59", None, OK, DEC, id="6.F-Fairbanks-Dec-in-window"),
    case("2026-12-15 15:00:01", SAFETY, V, DEC, id="6.F-Fairbanks-Dec-sun-down"),
]
# fmt: on


@pytest.mark.parametrize(
    ("local_time", "reason", "expected", "sunset"), BLAST_WINDOW_SUNSET_AFTER_MIDNIGHT_CASES
)
def test_blast_window_sunset_after_midnight(
    local_time: str, reason: str | None, expected: str, sunset: str
) -> None:
    finding = judge(local_time, reason, site=FAIRBANKS, tz=AK)
    assert finding.kind.value == expected
    assert finding.details["sunset_local"].startswith(sunset)
    assert finding.details["sun_case"] == "normal"
    if expected == SX and local_time.startswith("2026-06-22"):
        # Judged as the 21st's exception, and the finding says so.
        assert finding.details["exception_day"] == "2026-06-21"
        assert "after 15:00 on 2026-06-21" in finding.summary


def test_blast_after_midnight_is_a_new_day_when_the_profile_says_so() -> None:
    ts = at("2026-06-22 00:30:00", AK)
    data = SiteData(blasts=(blast(ts, reason=SAFETY, site="fbx"),))
    [default] = run("blast_window", data, ts, ts + timedelta(seconds=1), site=FAIRBANKS)
    [strict] = run(
        "blast_window", data, ts, ts + timedelta(seconds=1), site=FAIRBANKS, profile=NO_PAST_MIDNIGHT
    )
    assert (default.kind.value, strict.kind.value) == (SX, V)
    assert "before 10:00" in strict.summary


# Polar day (Tromso in June): the exception runs to local midnight, then the next day's 10:00
# rule applies. Polar night (December): no daylight, no exception. Stated in the profile.
# fmt: off
BLAST_WINDOW_POLAR_MIDNIGHT_CASES = [
    case("2026-06-15 23:59:59", SAFETY, SX, id="6.F-polar-day-23:59:59-exception"),
    case("2026-06-16 00:00:00", SAFETY, V, id="6.F-polar-day-00:00:00-next-day-before-10"),
    case("2026-12-15 15:00:00", None, OK, id="6.F-polar-night-15:00:00-in-window"),
    case("2026-12-15 15:00:01", SAFETY, V, id="6.F-polar-night-15:00:01-no-exception"),
]
# fmt: on


@pytest.mark.parametrize(("local_time", "reason", "expected"), BLAST_WINDOW_POLAR_MIDNIGHT_CASES)
def test_blast_window_polar_day_ends_at_midnight(local_time: str, reason: str | None, expected: str) -> None:
    assert judge(local_time, reason, site=TROMSO, tz="Europe/Oslo").kind.value == expected


OWNERS = (AdjoiningOwner("p-12", "R. Hansen", "N 1/2 SE 1/4 sec 12"), AdjoiningOwner("p-14", "K. Olsen"))
SITE_WITH_OWNERS = dataclasses.replace(SITE, adjoining_owners=OWNERS)
HANSEN, OLSEN = "R. Hansen (p-12, parcel N 1/2 SE 1/4 sec 12)", "K. Olsen (p-14)"


def judge_notice(*notices: BlastNotice, site: SiteContext = SITE_WITH_OWNERS) -> Finding:
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=notices)
    [finding] = run("blast_notice", data, BLAST_AT, BLAST_AT + timedelta(minutes=1), site=site)
    return finding


def sent(
    to: tuple[str, ...], before: timedelta = timedelta(hours=30), planned: timedelta = timedelta(0)
) -> BlastNotice:
    return BlastNotice("pit1", "b1", BLAST_AT - before, BLAST_AT + planned, to)


# fmt: off
BLAST_NOTICE_RECIPIENT_CASES = [
    case(("Town Clerk", "p-12", "K. Olsen"), [], id="6.F-Town-and-every-owner"),
    case(("  town   CLERK ", "P-12", "k. olsen"), [], id="6.F-names-ignore-case-and-spacing"),
    case(("Town Clerk", "p-12"), [OLSEN], id="6.F-one-owner-missed"),
    case(("p-12", "p-14"), ["the Town"], id="6.F-Town-missed"),
    case((), ["the Town", HANSEN, OLSEN], id="6.F-nobody-listed"),
    case(("Town Clerk", "Hansen"), [HANSEN, OLSEN], id="6.F-partial-name-does-not-count"),
]
# fmt: on


@pytest.mark.parametrize(("recipients", "missed"), BLAST_NOTICE_RECIPIENT_CASES)
def test_blast_notice_recipients(recipients: tuple[str, ...], missed: list[str]) -> None:
    finding = judge_notice(sent(recipients))
    assert finding.details["missed_recipients"] == missed
    assert finding.kind.value == (V if missed else OK)
    for who in missed:
        assert who in finding.summary
    if missed:
        assert finding.details["decided_by"] == "recipients"


CLERK = TownContact("town-clerk", "Town of Dovre clerk")
SITE_WITH_CONTACTS = dataclasses.replace(SITE_WITH_OWNERS, town_contacts=(CLERK,))

# fmt: off
RECIPIENT_IDENTITY_CASES = [
    # (recipients, reached, missed, unmatched): issue 27, recipients as identities
    case(("Town of Dovre clerk", "p-12", "p-14"), ["the Town", HANSEN, OLSEN], [], [],
         id="6.F-a-Town-contact-by-name-is-the-Town"),
    case(("TOWN-CLERK", "p-12", "K. Olsen"), ["the Town", HANSEN, OLSEN], [], [],
         id="6.F-a-Town-contact-by-id"),
    case(("Town Clerk", "p-12", "p-14"), ["the Town", HANSEN, OLSEN], [], [],
         id="6.F-a-profile-town-name-still-counts"),
    case(("Town of Dovre clark", "p-12", "p-14", "Bob"), [HANSEN, OLSEN], ["the Town"],
         ["Town of Dovre clark", "Bob"], id="6.F-misspelt-and-unknown-names-match-no-one"),
    case((" bob ", "Bob", "p-12"), [HANSEN], ["the Town", OLSEN], ["bob"], id="6.F-unmatched-once"),
]
# fmt: on


@pytest.mark.parametrize(("recipients", "reached", "missed", "unmatched"), RECIPIENT_IDENTITY_CASES)
def test_recipients_are_identities(
    recipients: tuple[str, ...], reached: list[str], missed: list[str], unmatched: list[str]
) -> None:
    from rules.blast_notice import check_recipients

    params = DOVRE.standard("blast_notice").params
    check = check_recipients(SITE_WITH_CONTACTS, params, recipients)
    assert (list(check.reached), list(check.missed), list(check.unmatched)) == (reached, missed, unmatched)
    finding = judge_notice(sent(recipients), site=SITE_WITH_CONTACTS)
    assert finding.kind.value == (V if missed else OK)
    assert finding.details.get("unmatched_recipients", []) == unmatched


def test_a_pending_notice_with_a_name_that_matches_no_one_warns_at_once() -> None:
    """Not discovered as a violation after the blast: the operator is warned while it is pending."""
    from rules import blast_notice

    to = ("town-clerk", "p-12", "p-14", "Mrs Hanson")
    pending = BlastNotice("pit1", "b8", BLAST_AT - timedelta(hours=30), BLAST_AT, to)
    standard = DOVRE.standard("blast_notice")
    data = SiteData(blast_notices=(pending,))
    [warning] = blast_notice.early_warnings(
        SITE_WITH_CONTACTS, standard, standard.params, data, BLAST_AT - timedelta(hours=12)
    )
    assert "recipient 'Mrs Hanson' matches no Town contact or adjoining owner" in warning.summary
    assert warning.details["unmatched_recipients"] == ["Mrs Hanson"]
    assert warning.details["missed_recipients"] == []


def test_without_listed_owners_only_the_town_is_checked_and_the_finding_says_so() -> None:
    finding = judge_notice(sent(("Town of Dovre",)), site=SITE)
    assert finding.kind.value == OK
    assert any("no owners are listed in the site configuration" in c for c in finding.details["considered"])


def test_the_owners_considered_are_6f_adjacent_owners_not_section_2s_adjoining_property() -> None:
    """6.F: "all owners of adjacent property lying within one-half (1/2) mile", not section 2's
    defined "adjoining property" (which needs a residence): the notice quotes 6.F."""
    finding = judge_notice(sent(("Town of Dovre", "p-12", "p-14")))
    [owners] = [c for c in finding.details["considered"] if c.startswith("Owners")]
    quote = "'all owners of adjacent property lying within one-half (1/2) mile of the nonmetallic mine site'"
    assert quote in owners
    assert "section 2: parcels within 1/2 mile with a residence" not in owners
    assert owners.endswith("owner(s) listed in the site configuration.")


def test_a_timely_reissue_adds_its_recipients_a_late_one_does_not() -> None:
    town_only = sent(("Town Clerk",), before=timedelta(hours=48))
    owners_in_time = sent(("p-12", "p-14"), before=timedelta(hours=24))
    owners_late = sent(("p-12", "p-14"), before=timedelta(hours=23, minutes=59))
    assert judge_notice(town_only, owners_in_time).kind.value == OK
    late = judge_notice(town_only, owners_late)
    assert late.kind.value == V and late.details["missed_recipients"] == [HANSEN, OLSEN]


EVERYONE = ("Town Clerk", "p-12", "p-14")

# fmt: off
BLAST_FIRED_BEFORE_ANNOUNCED_TIME_CASES = [
    case(timedelta(hours=1), OK, id="6.F-fired-exactly-1h-early-is-tolerated"),
    case(timedelta(hours=1, seconds=1), V, id="6.F-fired-1h00m01s-early-not-this-notice"),
    case(timedelta(days=1), V, id="6.F-fired-a-day-early"),
    case(timedelta(0), OK, id="6.F-fired-on-time"),
    case(-timedelta(hours=3), OK, id="6.F-fired-3h-late"),
]
# fmt: on


@pytest.mark.parametrize(("planned_after", "expected"), BLAST_FIRED_BEFORE_ANNOUNCED_TIME_CASES)
def test_blast_fired_before_its_announced_time(planned_after: timedelta, expected: str) -> None:
    finding = judge_notice(sent(EVERYONE, before=timedelta(days=3), planned=planned_after))
    assert finding.kind.value == expected
    if expected == V:
        assert finding.details["decided_by"] == "fired_early"
        assert "did not give notice of this blast" in finding.summary


# fmt: off
BLAST_FIRED_AFTER_ANNOUNCED_TIME_CASES = [
    # planned before the blast by: a notice announces a blast on its planned local day (Chicago)
    case(timedelta(hours=10, minutes=59), OK, id="6.F-fired-later-the-same-day"),
    case(timedelta(hours=11, minutes=1), V, id="6.F-fired-the-next-day-not-this-notice"),
    case(timedelta(days=1), V, id="6.F-fired-a-day-late"),
    case(timedelta(weeks=6), V, id="6.F-fired-six-weeks-late"),
]
# fmt: on


@pytest.mark.parametrize(("planned_before", "expected"), BLAST_FIRED_AFTER_ANNOUNCED_TIME_CASES)
def test_blast_fired_after_its_announced_day(planned_before: timedelta, expected: str) -> None:
    """A notice for June 3 told no one of a blast on July 15: it was judged compliant."""
    finding = judge_notice(sent(EVERYONE, before=planned_before + timedelta(days=2), planned=-planned_before))
    assert finding.kind.value == expected
    if expected == V:
        assert finding.details["decided_by"] == "fired_late"
        assert "after the time its notice announced" in finding.summary
        assert "did not give notice of this blast" in finding.summary


def test_late_tolerance_is_a_profile_param() -> None:
    lenient = with_overrides(blast_notice__late_tolerance_days=1)
    a_day_late = sent(EVERYONE, before=timedelta(days=3), planned=-timedelta(days=1))
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=(a_day_late,))
    findings = run("blast_notice", data, BLAST_AT, BLAST_AT + timedelta(minutes=1), profile=lenient)
    assert kinds(findings) == [OK]
    assert any("within 1 local day(s) after" in c for c in findings[0].details["considered"])


def test_the_lead_is_the_notice_that_announced_the_blasts_time() -> None:
    """A re-issued notice moved the blast earlier: the first notice (for another day) gave 72 h,
    the one that announced this time 24 h; the finding said 72 h."""
    first = sent(EVERYONE, before=timedelta(hours=72), planned=timedelta(days=2))
    moved = sent(EVERYONE, before=timedelta(hours=24))
    finding = judge_notice(first, moved)
    assert finding.kind.value == OK
    assert "announced 24 h 00 min ahead" in finding.summary
    assert finding.measurements[0].value == 24.0
    # The re-issue came 23 h ahead: that is the notice of this blast, and it was late.
    late = judge_notice(first, sent(EVERYONE, before=timedelta(hours=23)))
    assert late.kind.value == V and late.details["decided_by"] == "lead_time"
    assert "was announced 23 h 00 min ahead, less than the 24 hours' notice required" in late.summary


def test_an_owner_reached_too_late_is_told_as_such() -> None:
    """The Town had 72 h, K. Olsen 1 h: the finding said Olsen was "not announced to"."""
    finding = judge_notice(
        sent(("Town Clerk", "p-12"), before=timedelta(hours=72)), sent(("p-14",), before=timedelta(hours=1))
    )
    assert finding.kind.value == V and finding.details["missed_recipients"] == [OLSEN]
    assert f"was announced to {OLSEN} only 1 h 00 min ahead" in finding.summary
    assert "not announced to" not in finding.summary


def test_a_notice_after_the_blast_says_how_long_after() -> None:
    finding = judge_notice(sent(EVERYONE, before=-timedelta(minutes=5)))
    assert finding.kind.value == V
    assert "was announced only 0 h 05 min after it went off; 24 hours' notice is required before" in (
        finding.summary
    )


# fmt: off
NOTICE_HOURS_EXCLUDED_CASES = [
    # (issued, blast, hours_exclude, expected): Wis. Stat. 990.001(4)(a) leaves out Sundays and
    # legal holidays, midnight to midnight, from a time expressed in hours
    case("2026-06-13 11:00", "2026-06-15 10:30", (), OK, id="6.F-elapsed-47h30-over-a-Sunday"),
    case("2026-06-13 11:00", "2026-06-15 10:30", ("sunday",), V, id="6.F-Sunday-left-out-23h30"),
    case("2026-06-13 10:30", "2026-06-15 10:30", ("sunday",), OK, id="6.F-Sunday-left-out-exactly-24h"),
    case("2026-07-03 12:00", "2026-07-06 11:00", ("sunday", "wisconsin"), V,
         id="6.F-Sunday-and-July-4-left-out-23h"),
    case("2026-07-03 12:00", "2026-07-06 11:00", ("sunday",), OK, id="6.F-July-4-counted-without-calendar"),
    case("2026-03-07 10:00", "2026-03-09 10:00", ("sunday",), OK, id="6.F-a-23-hour-Sunday-left-out-whole"),
]
# fmt: on


@pytest.mark.parametrize(("issued", "fired", "exclude", "expected"), NOTICE_HOURS_EXCLUDED_CASES)
def test_notice_hours_may_leave_out_sundays_and_holidays(
    issued: str, fired: str, exclude: tuple[str, ...], expected: str
) -> None:
    profile = with_overrides(blast_notice__hours_exclude=list(exclude))
    fired_at = at(fired)
    given = BlastNotice("pit1", "b1", at(issued), fired_at, EVERYONE)
    data = SiteData(blasts=(blast(fired_at),), blast_notices=(given,))
    end = fired_at + timedelta(minutes=1)
    [finding] = run("blast_notice", data, fired_at, end, profile=profile, site=SITE_WITH_OWNERS)
    assert finding.kind.value == expected
    counting = [c for c in finding.details["considered"] if "990.001(4)(a)" in c]
    assert len(counting) == 1 and (("leaving out" in counting[0]) == bool(exclude))


def test_a_pending_blast_is_warned_of_the_hours_left_out() -> None:
    """The operator's early warning gives the first moment the blast may go off, counted the same way."""
    from zoneinfo import ZoneInfo

    from rules import blast_notice

    standard = with_overrides(blast_notice__hours_exclude=["sunday"]).standard("blast_notice")
    given = BlastNotice("pit1", "b9", at("2026-06-13 11:00"), at("2026-06-15 10:30"), EVERYONE)
    [warning] = blast_notice.early_warnings(
        SITE_WITH_OWNERS, standard, standard.params, SiteData(blast_notices=(given,)), at("2026-06-13 11:05")
    )
    assert "it may not be fired before 2026-06-15 11:00 CDT" in warning.summary
    tz = ZoneInfo("America/Chicago")
    assert blast_notice.earliest_allowed(at("2026-06-12 09:00"), standard.params, tz) == at(
        "2026-06-13 09:00"
    )


def test_hours_exclude_names_its_field() -> None:
    with pytest.raises(ProfileError, match="hours_exclude: expected weekday names, dates like '2026-07-03'"):
        with_overrides(blast_notice__hours_exclude=["sundae"])


def test_early_tolerance_is_a_profile_param() -> None:
    strict = with_overrides(blast_notice__early_tolerance_h=0.0)
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=(sent(EVERYONE, planned=timedelta(minutes=1)),))
    findings = run("blast_notice", data, BLAST_AT, BLAST_AT + timedelta(minutes=1), profile=strict)
    assert kinds(findings) == [V]


# fmt: off
NOTICE_WARNING_CASES = [
    case(EVERYONE, timedelta(hours=30), None, id="6.F-pending-notice-complete-no-warning"),
    case(("Town Clerk", "p-12"), timedelta(hours=30), f"not gone to {OLSEN}", id="6.F-pending-missed-owner"),
    case(EVERYONE, timedelta(hours=23, minutes=59), "it may not be fired before", id="6.F-pending-23h59"),
    case(("p-12", "p-14"), timedelta(hours=20), "; and its notice has not gone to the Town", id="6.F-both"),
]
# fmt: on


@pytest.mark.parametrize(("to", "lead", "words"), NOTICE_WARNING_CASES)
def test_pending_notice_warns_of_who_was_missed(
    to: tuple[str, ...], lead: timedelta, words: str | None
) -> None:
    from rules import blast_notice

    pending = BlastNotice("pit1", "b7", BLAST_AT - lead, BLAST_AT, to)
    standard = DOVRE.standard("blast_notice")
    now = BLAST_AT - timedelta(hours=12)
    data = SiteData(blast_notices=(pending,))
    warnings = blast_notice.early_warnings(SITE_WITH_OWNERS, standard, standard.params, data, now)
    if words is None:
        assert warnings == []
    else:
        [warning] = warnings
        assert words in warning.summary and warning.kind.value == "warning"


def test_a_blast_with_no_notice_missed_everyone_and_says_who() -> None:
    finding = judge_notice()
    assert finding.kind.value == V and finding.details["decided_by"] == "no_notice"
    assert finding.details["missed_recipients"] == ["the Town", HANSEN, OLSEN]


def test_early_warnings_are_as_of_now_not_of_records_ahead_of_it() -> None:
    """The daemon's data clock may hold a blast recorded for later than the time it works at: as
    of ``now`` that blast has not gone off (issue 25: the same simulation gives the same
    warnings however its data was batched)."""
    from rules.blast_window import early_warnings

    planned = at("2026-12-15 14:58")
    now = at("2026-12-15 14:51")
    given = notice("b1", planned - timedelta(days=1), planned)
    standard = DOVRE.standard("blast_window")

    def warned(data: SiteData) -> list[Finding]:
        return early_warnings(SITE, standard, standard.params, data, now)

    before = warned(SiteData(blast_notices=(given,)))
    assert len(before) == 1 and "has not gone off" in before[0].summary
    assert warned(SiteData(blast_notices=(given,), blasts=(blast(planned, blast_id="b1"),))) == before
    assert (
        warned(SiteData(blast_notices=(given,), blasts=(blast(now - timedelta(minutes=1), blast_id="b1"),)))
        == []
    )


FERNHILL = load_profile(str(DATA / "profiles" / "fernhill.toml"))  # 36 hours' notice, § 4.7(c)


def test_another_towns_blast_notice_readings_cite_no_dovre_law() -> None:
    """What the notice finding lists as read comes from the profile: Fernhill names no statute on
    counting hours (hours_source) and no reading of which owners (owners_reading), so its finding
    cites neither Wis. Stat. 990.001(4)(a) nor Dovre's 6.F and section 2."""
    data = SiteData(blasts=(blast(BLAST_AT),), blast_notices=(sent(("Township", "p-12", "p-14")),))
    end = BLAST_AT + timedelta(minutes=1)
    [finding] = run("blast_notice", data, BLAST_AT, end, profile=FERNHILL, site=SITE_WITH_OWNERS)
    considered = finding.details["considered"]
    hours = "The 36 hours are counted as elapsed time, Sundays and holidays included (minewatch reading"
    assert f"{hours}, for the Town to confirm)." in considered
    owners = "Owners: minewatch checks the owners the Town listed for the site: 2 owner(s) listed"
    assert f"{owners} in the site configuration." in considered
    assert not [c for c in considered if re.search(r"990\.001|6\.F|section 2|Dovre", c)], considered
    assert "(§ 4.7(c))" in finding.summary


def test_the_town_recipients_default_names_no_town() -> None:
    """A profile that lists no town_recipients takes generic names, not Dovre's "Town of Dovre"."""
    from rules.blast_notice import BlastNoticeParams

    assert BlastNoticeParams().town_recipients == ("Town", "Town Clerk", "Town Board")
