"""monitor/shown_text.py: others' text printed on a terminal cannot steer it."""

from __future__ import annotations

import pytest

from monitor.shown_text import one_line


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Blast B-7 went off at 16:02", "Blast B-7 went off at 16:02"),
        ("Süd – 2026/06 #3 😀", "Süd – 2026/06 #3 😀"),
        ("a\x1b[1A\x1b[2Kb", "a\\x1b[1A\\x1b[2Kb"),
        ("line\nnext\rback\ttab", "line\\nnext\\rback\\ttab"),
        ("B-\u202e7", "B-\\u202e7"),
        ("half \ud800 pair", "half \\ud800 pair"),
        ("nul\x00", "nul\\x00"),
        ("back\\slash", "back\\slash"),
    ],
)
def test_one_line(text: str, shown: str) -> None:
    assert one_line(text) == shown
