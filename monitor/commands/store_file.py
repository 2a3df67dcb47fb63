"""The store a command reads (``storage.path``): a minewatch store, looked at read-only first,
by every command that needs one (status, notices, report, report-blast, evidence, verify, influx,
serve), in the same words. A missing one is said with what makes it (the daemon). A file that is
no SQLite database, or another program's database named by mistake, is the user's mistake, said
as the daemon says it (StoreError, which monitor.cli prints in one line with the configuration's
key); it is left as it is, as is an empty file the user made (`touch`). A folder is no store
either, not a missing one. check-config says the same (store_refusal) on the key.

The store `run` takes (``daemon_refusal``): the same, and a store this user cannot write, which
`run` and check-config refuse in one line before anything is written or connected. The store a
command writes (``writable_store``: serve, report, the notices' changes, influx requeue): an
existing one, and one this user can write, refused in the same line before it writes. Every
other command only reads its store, and works on one this user may read and not write: the
-wal and -shm its reading makes there are removed as it ends (they stayed, this user's files,
and the store's own user could no longer write the store)."""

from __future__ import annotations

import atexit
import os
import sqlite3
from pathlib import Path

from monitor.errors import StoreError, UsageError
from monitor.journal.store import (
    cannot_open,
    cannot_write,
    folder_blocked,
    named_a_folder,
    remove_what_reading_made,
    store_file_refusal,
    store_not_opened,
)


def existing_store(path: str, config: str) -> Path:
    """``path``, a minewatch store (or one being made); refused otherwise (an empty file the user
    made too), read-only."""
    store = Path(path)
    try:
        refusal = store_refusal(path)
    except sqlite3.Error as exc:  # a store this user may not read is said as the daemon says it
        raise StoreError(cannot_open(path, exc, write=False)) from None
    if refusal is not None:
        raise StoreError(refusal)
    if not store.is_file():
        raise UsageError(
            f"no store at {path} (storage.path in {config}); the daemon makes it:"
            " has `minewatch run` run with this configuration?"
        )
    return store


def writable_store(path: str, config: str) -> Path:
    """``path``, a minewatch store (existing_store) this user can write, for a command that
    writes it; refused otherwise in run's words (cannot write the store '...': ...), before the
    command writes anything: a store it can only read failed at its first write, after a report's
    files were written, with a traceback, or kept the portal answering every login with "the
    store cannot take writes now" (kept for a disk that fills up while it runs) for good."""
    store = existing_store(path, config)
    if (refused := cannot_write(path)) is not None:
        raise StoreError(refused)
    return store


def store_refusal(path: str) -> str | None:
    """Why the file at ``path`` is no minewatch store, in the daemon's words: a folder, a file
    that is no SQLite database, an empty file the user made, another program's database, a
    sensor's queue. None for a store (or one being made) and for no file at all (the daemon
    makes it). Read-only; sqlite3.Error when the file cannot be read here (the daemon's own,
    to another user). The first look of every command at its store: of one this user may not
    write, the -wal and -shm its reading makes are removed as the process ends."""
    store = Path(path)
    if (folder := named_a_folder(path)) is not None:  # the daemon refuses it, and makes no store
        return store_not_opened(path, folder)
    if not store.is_file():
        return None
    _removed_at_exit(path)
    try:
        conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            return store_file_refusal(conn, path)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_NOTADB:
            raise
        return store_not_opened(path, str(exc))


def daemon_refusal(path: str) -> str | None:
    """Why `run` as this user refuses ``path`` as its store, in one line: a path under a file,
    no minewatch store, a store this user cannot read (another user's, 0600), or one it can read
    and not write (its file, -wal, -shm, claim file or folder), which `run` would take and then
    fail on every write. None when `run` takes it (or makes it). Looks only: `run` says it as it
    starts, before it connects, and check-config on storage.path, in these words."""
    try:
        return folder_blocked(path) or store_refusal(path) or cannot_write(path)
    except sqlite3.Error as exc:  # not readable here: said as the daemon's open says it
        return cannot_open(path, exc)


_REMOVED_AT_EXIT: set[str] = set()  # the stores whose reading's files this process removes


def _removed_at_exit(path: str) -> None:
    """The -wal and -shm a reading of ``path`` makes, removed as this process ends when this
    user may not write the store (remove_what_reading_made): SQLite's last connection removes
    them only when it may write it. Every connection of a command is closed by then."""
    real = os.path.realpath(path)  # where SQLite makes them: beside the file a link names
    if real in _REMOVED_AT_EXIT or os.access(real, os.W_OK):
        return
    _REMOVED_AT_EXIT.add(real)
    atexit.register(remove_what_reading_made, real)
