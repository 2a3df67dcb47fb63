"""Whether an SQLite file a person named is one of ours or another program's database.

The daemon's store (``storage.path``) and a sensor's queue (``--queue``) are made where the
configuration or the command line says. Pointed at another program's database by mistake, each
would have added its tables there and switched the file to WAL: they look first, and a database
that holds tables but none of theirs is left as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def someone_elses(conn: sqlite3.Connection, own: Iterable[str]) -> str | None:
    """What the database is when it holds tables and none of ``own``: "another program's SQLite
    database (tables ...)", for the caller's refusal; None when it is empty or ours. Reads only;
    sqlite3.DatabaseError for a file that is no database."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    if not names or not set(names).isdisjoint(own):
        return None
    most = 5
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"another program's SQLite database (tables {', '.join(names[:most])}{more})"
