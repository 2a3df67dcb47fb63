"""The SQLite files of the daemon's store (``storage.path``) and a sensor's queue (``--queue``).

Whether a file a person named is one of ours or another program's database: pointed at another
program's database by mistake, each would have added its tables there and switched the file to
WAL; they look first, and a database that holds tables but none of theirs is left as it is.

Whether an error says the file's disk refuses writes for now (``refuses_writes``): a full disk,
an I/O error, read-only files. Each keeps what it could not write and tries again, rather than
dying or blaming a message.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

# minewatch's own files, each told by tables of its own: named as the other kind by mistake.
_OURS = (
    ({"migrations", "chain"}, "a minewatch store (storage.path)"),
    ({"messages", "drops"}, "a sensor's queue (minewatch sensor --queue)"),
)


def someone_elses(conn: sqlite3.Connection, own: Iterable[str]) -> str | None:
    """What the database is when it holds tables and none of ``own``: "another program's SQLite
    database (tables ...)", or minewatch's other kind of file ("a sensor's queue (...)"), for the
    caller's refusal; None when it is empty or ours. Reads only; sqlite3.DatabaseError for a
    file that is no database."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    if not names or not set(names).isdisjoint(own):
        return None
    for marks, what in _OURS:
        if marks <= set(names):  # minewatch's other file: the queue named as the store, or back
            return what
    most = 5
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"another program's SQLite database (tables {', '.join(names[:most])}{more})"


def not_a_store(path: str, what: str) -> str:
    """The refusal of a file at ``storage.path`` that is ``what`` (someone_elses,
    not_a_stores_making), in the words of the daemon, the commands and check-config."""
    return f"{path!r} is {what}, not a minewatch store; name a new file for the store"


# The store's mark in its file's header (PRAGMA application_id, which SQLite keeps for a program
# to tell its files by): b"MWst". Set on a new store before its name appears (Store:
# _make_store_file), so that until its tables are made it is told from another program's
# database with no tables, WAL mode or not.
STORE_APPLICATION_ID = int.from_bytes(b"MWst", "big")


def not_a_stores_making(conn: sqlite3.Connection, path: str) -> str | None:
    """What a file with no tables at all is when minewatch did not make it as a store: "an empty
    file" (`touch`), "a SQLite database with no tables" (another program's, in WAL mode or not);
    None when it holds tables (someone_elses judges those) or carries the store's mark, which
    the store sets on its file before the file's name appears. Reads only."""
    if conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None:
        return None
    with open(path, "rb") as file:
        header = file.read(100)
    if not header:
        return "an empty file"
    marked = int.from_bytes(header[68:72], "big") == STORE_APPLICATION_ID  # the application id's field
    return None if marked else "a SQLite database with no tables"


# SQLite's primary result codes (an extended code's low byte) that say the files or their disk
# refuse writes for now, not that a statement or the code is at fault.
_REFUSED_BECAUSE = {
    sqlite3.SQLITE_FULL: "the disk is full",
    sqlite3.SQLITE_IOERR: "the disk reported an I/O error",
    sqlite3.SQLITE_READONLY: "the files are read-only",
    sqlite3.SQLITE_CANTOPEN: "the files cannot be opened",
    sqlite3.SQLITE_BUSY: "another process held the write lock past the busy timeout",
}


class WritesRefused(NamedTuple):
    code: int  # SQLite's primary result code: what the advice to the operator follows
    reason: str  # "the disk is full (database or disk is full)"


def writes_refused(exc: BaseException) -> WritesRefused | None:
    """Why, when ``exc`` (or what it was raised in handling: SQLite may roll a whole transaction
    back on a full disk, and a savepoint's ROLLBACK TO then fails in its turn) says the database
    refuses writes for now; None for any other error."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        code = getattr(seen, "sqlite_errorcode", None)
        reason = _REFUSED_BECAUSE.get(code & 0xFF) if isinstance(code, int) else None
        if isinstance(seen, sqlite3.Error) and isinstance(code, int) and reason is not None:
            return WritesRefused(code & 0xFF, f"{reason} ({seen})")
        seen = seen.__cause__ or seen.__context__
    return None


def refuses_writes(exc: BaseException) -> str | None:
    """writes_refused's reason alone."""
    refused = writes_refused(exc)
    return None if refused is None else refused.reason
