"""Text from others, shown on a terminal one line at a time: what could steer the terminal, as escapes.

A bundle's cells, a store's blast ids and a report's text are written by others: a forger, an
operator. Printed as they are, a line break starts a line of theirs, a carriage return or a
terminal escape (``ESC [1A``: cursor up, ``ESC [2K``: erase the line) rubs out what was printed
before, and a right-to-left override turns what follows around. Every such character (a control,
format, separator or unassigned one: not ``str.isprintable``) is shown as its Python escape.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` as one line of printable characters (and spaces), the rest as escapes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
