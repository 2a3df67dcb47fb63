"""The three verdicts of a complaint against the record (rules/complaints.py), table-driven."""

from __future__ import annotations

import pytest

from rules.complaints import MonitorLevels, RecordItem, Verdict, judge

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
