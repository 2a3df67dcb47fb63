"""The three verdicts of a complaint against the record (rules/complaints.py), table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rules.complaints import (
    MonitorLevels,
    PlacedComplaint,
    RecordItem,
    Verdict,
    complaint_area,
    judge,
    placement_alert_due,
    placement_signals,
)

LOUD = RecordItem("episode", "violation episode: 6.D at n2", frozenset({"noise"}), frozenset({"noise"}))
BLAST = RecordItem("blast", "blast B-1 at 11:00:30 CST", frozenset({"blast", "noise"}), frozenset({"blast"}))
QUIET = MonitorLevels("n1", "sound", 1800, 1800, 61.04, "dB(A)")
SILENT = MonitorLevels("n1", "sound", 0, 1800, None, "dB(A)")


@pytest.mark.parametrize(
    ("category", "monitors", "items", "verdict", "text"),
    [
        ("noise", [QUIET], [LOUD], Verdict.CORROBORATED, "corroborated by the record: violation episode"),
        (
            "noise",
            [QUIET],
            [BLAST],
            Verdict.NOT_CORROBORATED,
            "not corroborated: all monitors at or below 61.0 dB(A)",
        ),
        ("blast", [QUIET], [BLAST], Verdict.CORROBORATED, "corroborated by the record: blast B-1"),
        ("noise", [SILENT], [], Verdict.NO_MONITOR, "no monitor covers it"),
        ("light", [QUIET], [], Verdict.NO_MONITOR, "no monitor covers it"),
        ("dust", [QUIET], [], Verdict.NO_MONITOR, "no monitor covers it (minewatch measures no dust)"),
    ],
)
def test_verdicts(
    category: str, monitors: list[MonitorLevels], items: list[RecordItem], verdict: Verdict, text: str
) -> None:
    judged = judge(category, monitors, items)
    assert judged.verdict is verdict
    assert judged.text.startswith(text)


def test_not_corroborated_is_never_without_the_numbers() -> None:
    judged = judge("noise", [QUIET, MonitorLevels("n2", "sound", 120, 1800, 66.95, "dB(A)")], [])
    assert "67.0 dB(A)" in judged.text and "1,920 of 3,600 seconds received" in judged.text
    assert judged.basis == ("n1: highest 61.0 dB(A)", "n2: highest 67.0 dB(A)")


# --------------------------------------------------------------------------- placement signals

NOW = datetime(2026, 11, 30, 18, tzinfo=UTC)
N1 = ("monitor:n1", "near monitor n1 (north boundary)")


def placed(
    ref: str,
    days_ago: float,
    verdict: str = "not_corroborated",
    what: str = "noise",
    area: tuple[str, str] = N1,
) -> PlacedComplaint:
    start = NOW - timedelta(days=days_ago)
    return PlacedComplaint(ref, start, what, verdict, f"day -{days_ago:g}", *area)


def test_three_unborne_complaints_from_one_area_within_the_period_are_a_placement_signal() -> None:
    complaints = [
        placed("C-1", 20),
        placed("C-2", 9, "no_monitor"),
        placed("C-3", 1),
        placed("C-4", 2, "corroborated"),  # borne out by the record: not a placement signal
        placed("C-5", 40),  # outside the 30 days
        placed("C-6", 3, area=("address:12 elm road", "at 12 Elm Road")),
    ]
    [signal] = placement_signals(complaints, NOW)
    assert [c.id for c in signal.complaints] == ["C-1", "C-2", "C-3"]
    assert signal.area == "monitor:n1" and signal.kind == "sound"
    assert signal.condition == "placement:sound:monitor:n1"
    assert signal.text.startswith(
        "Placement signal: 3 complaints of noise near monitor n1 (north boundary) within 30 days"
        " (2 not corroborated by the monitors there; 1 where no monitor covered it)."
    )
    assert "consider the monitors' placement" in signal.text
    assert "C-1 (noise, day -20); C-2 (noise, day -9); C-3 (noise, day -1)" in signal.text
    # Two are not enough; a longer period or a lower count are the Town's to set.
    assert placement_signals(complaints[1:], NOW) == []
    assert len(placement_signals(complaints[1:], NOW, count=2)) == 1
    assert len(placement_signals(complaints, NOW, period=timedelta(days=45))[0].complaints) == 4


def test_a_light_complaint_is_not_counted_with_noise_ones_from_the_same_address() -> None:
    elm = ("address:12 elm road", "at 12 Elm Road")
    complaints = [
        placed("C-1", 1, area=elm),
        placed("C-2", 2, area=elm),
        placed("C-3", 3, what="light", area=elm),
    ]
    assert placement_signals(complaints, NOW) == []
    complaints.append(placed("C-4", 4, area=elm, what="blast"))
    [signal] = placement_signals(complaints, NOW)
    assert "complaints of blast or vibration and noise at 12 Elm Road" in signal.text


def test_the_area_of_a_complaint() -> None:
    monitors = [
        ("l1", "light", 40.0, "north lamp"),
        ("n2", "sound", 90.0, "east"),
        ("n1", "sound", 120.0, ""),
    ]
    assert complaint_area("noise", "", True, monitors) == ("monitor:n2", "near monitor n2 (east)")
    assert complaint_area("light", "", True, monitors) == ("monitor:l1", "near monitor l1 (north lamp)")
    # Without a point on the plan (or monitors placed): the address, case and spacing aside.
    unplaced = [(s, k, None, w) for s, k, _, w in monitors]
    assert complaint_area("noise", " 12  Elm Road ", True, unplaced) == (
        "address:12 elm road",
        "at 12 Elm Road",
    )
    assert complaint_area("noise", "", False, monitors) == ("", "")


def test_one_placement_alert_a_period() -> None:
    period = timedelta(days=30)
    assert placement_alert_due(None, NOW, period)
    assert not placement_alert_due(NOW - timedelta(days=29), NOW, period)
    assert placement_alert_due(NOW - timedelta(days=30), NOW, period)
