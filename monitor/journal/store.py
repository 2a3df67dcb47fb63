"""The local store: SQLite in WAL mode, the daemon's durable journal.

Every accepted reading, event, finding, alert, rejection and health change is
written here, inside a transaction that commits *before* the message is
acknowledged to the broker or anything is sent downstream. Each record is also
appended to its site's hash chain (table ``chain``): ``digest`` is the SHA-256 of
the record's canonical JSON, ``head`` is SHA-256(previous head + digest). A later
edit of a row no longer matches its digest; a deleted or reordered row breaks the
chain (see monitor/journal/chain_kinds.py for the kinds, monitor/evidence/ for checking it).

One connection, used by one thread (the pipeline). Other threads (the Influx
forwarder, deliveries, CLI commands) open their own connections to the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import os
import pwd
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from monitor.claims import claims_path
from monitor.errors import StoreError, StoreUnwritable
from monitor.failing_rounds import FailingRounds
from monitor.journal import migrations, queries

# Re-exported (``as``): they lived here before monitor/journal/chain_kinds.py and monitor/wire/canonical.py.
from monitor.journal.chain_kinds import GENESIS as GENESIS
from monitor.journal.chain_kinds import KINDS
from monitor.journal.chain_kinds import digest_of as digest_of
from monitor.journal.chain_kinds import next_head as next_head
from monitor.journal.chain_kinds import sound_record as sound_record
from monitor.journal.migrations import SCHEMA_VERSION as SCHEMA_VERSION  # read-only openers compare it too
from monitor.sqlite_files import (
    STORE_APPLICATION_ID,
    not_a_store,
    not_a_stores_making,
    someone_elses,
    writes_refused,
)
from monitor.unfinished import interrupts_held
from monitor.wire.canonical import canonical_text, from_us
from monitor.wire.canonical import to_us as to_us
from monitor.wire.codec import (
    EVENT_KINDS,
    SENSOR_KINDS,
    WaveformChunk,
    event_from_row,
    finding_from_json,
    reading_from_row,
    seismic_events,
)
from monitor.wire.codec import finding_to_json as finding_to_json
from rules.model import (
    Event,
    Finding,
    GenericEvent,
    LightSummary,
    SeismicEvent,
    SensorStatus,
    SoundLevels,
    TurbidityReading,
    WeatherReading,
    event_span,
)

log = logging.getLogger("minewatch.store")

# A sound row as append_sounds binds it: SoundLevels' fields in their order (ts as ts_us), so
# a row is slices of the levels tuple, then the source (and late, received_us, chain_seq).
# The overload flag is not among them: see _SOUND_INSERT_OVERLOAD.
_SOUND_ROW = (*SoundLevels._fields[:2], "ts_us", *SoundLevels._fields[3:12], "source")
assert SoundLevels._fields[12:] == ("overload",)


def _sound_insert(columns: Sequence[str]) -> str:
    return f"INSERT OR IGNORE INTO sound ({', '.join(columns)}, late, received_us, chain_seq) VALUES "


_SOUND_INSERT = _sound_insert(_SOUND_ROW)
# The optional levels (LASmax ... LZeq, row[7:12]) are absent from most meters' messages, and
# Python's sqlite3 binds a None ~8x slower than a float (it looks for an adapter first): rows
# without any are inserted with those columns left out (NULL), the rest in full.
_NO_OPTIONALS = (None,) * 5
_USUAL_TAIL = (*_NO_OPTIONALS, False)  # SoundLevels[7:] of a second without them, not overloaded
_SOUND_INSERT_SHORT = _sound_insert((*_SOUND_ROW[:7], *_SOUND_ROW[12:]))
# An overloaded second (rare) sets the column the migration "sound-overload" added; every
# other row leaves it NULL, as the rows stored before it.
_SOUND_INSERT_OVERLOAD = _sound_insert((*_SOUND_ROW, "overload"))


def unwritable(exc: BaseException, path: str, stored: int = 0) -> StoreUnwritable | None:
    """``exc`` as a StoreUnwritable when it says the store refuses writes for now (else None)."""
    if isinstance(exc, StoreUnwritable):
        return StoreUnwritable(exc.path, exc.reason, stored, code=exc.code) if stored != exc.stored else exc
    refused = writes_refused(exc)
    return None if refused is None else StoreUnwritable(path, refused.reason, stored, code=refused.code)


def what_to_do(outage: StoreUnwritable) -> str:
    """What the operator does about a store refusing writes, by why it does (``outage.code``);
    a read-only file names the file, as the daemon's user finds it now. The daemon's log says it
    as an outage begins and in its reminders. Looks only."""
    if outage.code == sqlite3.SQLITE_FULL:
        return "Free space on the store's disk"
    if outage.code == sqlite3.SQLITE_BUSY:
        return "Find what holds the store's write lock (a command or another daemon writing to it)"
    folder = Path(outage.path).parent
    if _mounted_read_only(folder):  # a write there fails as an I/O error or read-only files
        return (
            f"The store's file system ({folder}) is mounted read-only: check the disk (the kernel"
            " mounts one so after its errors: dmesg), then remount it read-write"
        )
    if outage.code == sqlite3.SQLITE_IOERR:
        return (
            "Check the store's disk (the kernel's log: dmesg) and any limit on the size of the"
            " daemon's files (ulimit -f, LimitFSIZE=)"
        )
    refused = _first_refused(outage.path, write=True)  # read-only, or cannot be opened
    if refused is None:
        return "Make the store's files and their folder writable by the user minewatch runs as"
    what = "folder" if refused.folder else "file"
    try:
        mode = f", mode {stat.S_IMODE(refused.place.stat().st_mode):04o}"
    except OSError:  # gone since it was looked at
        mode = ""
    return (
        f"The {what} {refused.place} is not writable by this user ({_owner(refused.place)} owns it{mode}):"
        " restore its owner and permissions for the user minewatch runs as"
    )


class _NotFinite(Exception):
    pass


def _number(value: float | None) -> str:
    if value is None:
        return "null"
    number = float(value)
    if number - number != 0:  # inf or NaN, which json spells Infinity / NaN
        raise _NotFinite
    return repr(number)


# The canonical bytes of a sound record without building the dict and sorting its keys
# (the hot path: one per second per sound sensor). Equal to canonical_json(sound_record(row))
# byte for byte, which tests/monitor/journal/test_store.py checks over random rows.
@lru_cache(maxsize=65536)  # site, sensor and source: a handful, over and over
def _sound_tail(site: str, sensor: str, source: str) -> str:
    """The record's text after its levels, up to its time's digits."""
    sensor, site, source = (json.dumps(v, ensure_ascii=False) for v in (sensor, site, source))
    return f'"sensor":{sensor},"site":{site},"source":{source},"t":"sound","ts_us":'


def _usual_digest(
    site: str, sensor: str, ts_us: int, duration: Any, laeq: Any, lafmax: Any, lcpeak: Any, source: str
) -> str | None:
    """sound_digest of the usual row (no optional level, four finite floats, an int time) in
    one template; None for any other row, which takes the general text."""
    if type(duration) is float and type(laeq) is float and type(lafmax) is float and type(lcpeak) is float:
        total = duration + laeq + lafmax + lcpeak
        if total - total == 0 and type(ts_us) is int:  # all finite (an overflow to inf: the general text)
            return hashlib.sha256(
                f'{{"LAFmax":{lafmax!r},"LAFmin":null,"LASmax":null,"LAeq":{laeq!r},"LCeq":null,'
                f'"LCpeak":{lcpeak!r},"LZeq":null,"LZpeak":null,"duration_s":{duration!r},'
                f"{_sound_tail(site, sensor, source)}{ts_us}}}".encode()
            ).hexdigest()
    return None


def sound_digest(row: Sequence[Any], overload: bool = False) -> str:
    """digest_of(sound_record(...)) for a row of _SOUND_ROW values, without the dict."""
    if overload:  # rare: the record's general path, which adds the flag
        return digest_of(sound_record({**dict(zip(_SOUND_ROW, row[:13], strict=True)), "overload": 1}))
    site, sensor, ts_us, duration, laeq, lafmax, lcpeak, lasmax, lzpeak, lafmin, lceq, lzeq, source = row[:13]
    if lasmax is None and lzpeak is None and lafmin is None and lceq is None and lzeq is None:
        usual = _usual_digest(site, sensor, ts_us, duration, laeq, lafmax, lcpeak, source)
        if usual is not None:
            return usual
    try:
        text = (  # the keys in sorted order, as canonical_json() writes them; optional levels inline
            f'{{"LAFmax":{_number(lafmax)},"LAFmin":{"null" if lafmin is None else _number(lafmin)},'
            f'"LASmax":{"null" if lasmax is None else _number(lasmax)},"LAeq":{_number(laeq)},'
            f'"LCeq":{"null" if lceq is None else _number(lceq)},"LCpeak":{_number(lcpeak)},'
            f'"LZeq":{"null" if lzeq is None else _number(lzeq)},'
            f'"LZpeak":{"null" if lzpeak is None else _number(lzpeak)},"duration_s":{_number(duration)},'
            f"{_sound_tail(site, sensor, source)}{int(ts_us)}}}"
        )
    except _NotFinite:
        return digest_of(sound_record(dict(zip(_SOUND_ROW, row[:13], strict=True))))
    return hashlib.sha256(text.encode()).hexdigest()


class SoundEntry(NamedTuple):
    """A sound record as append_sounds stores and chains it, built without the store (pure), so
    the pipeline builds it before taking the write lock: under the lock only its chain link,
    ``late``, the receipt time and the entry's seq are added."""

    site: str
    key: str  # its chain key, KINDS["sound"].key_of spelled out (tests/monitor/evidence/test_golden.py)
    digest: str
    values: tuple[Any, ...]  # the row's values but late, received_us and chain_seq, in ``insert``'s columns
    # _SOUND_INSERT_SHORT when none of the optional levels is given, _SOUND_INSERT_OVERLOAD for
    # an overloaded second, else _SOUND_INSERT
    insert: str


# A site's sensors send the same seconds, and their datetimes are shared (the wire's parse
# cache): each second is converted once, not once per sensor.
_second_us = lru_cache(maxsize=4096)(to_us)


def sound_entry(levels: SoundLevels, source: str) -> SoundEntry:
    site, sensor, ts, duration, laeq, lafmax, lcpeak = levels[:7]
    ts_us = _second_us(ts)
    if levels[7:] == _USUAL_TAIL:  # no optional level, not overloaded: the usual second
        values = (site, sensor, ts_us, duration, laeq, lafmax, lcpeak, source)
        digest = _usual_digest(site, sensor, ts_us, duration, laeq, lafmax, lcpeak, source)
        if digest is None:
            digest = sound_digest((*values[:7], *_NO_OPTIONALS, source))
        # tuple.__new__: a NamedTuple's own __new__ costs twice as much, once per reading
        return tuple.__new__(SoundEntry, (site, f"{sensor}|{ts_us}", digest, values, _SOUND_INSERT_SHORT))
    row: tuple[Any, ...] = (site, sensor, ts_us, *levels[3:12], source)
    key = f"{sensor}|{ts_us}"
    if levels.overload:
        return SoundEntry(site, key, sound_digest(row, True), (*row, 1), _SOUND_INSERT_OVERLOAD)
    return SoundEntry(site, key, sound_digest(row), row, _SOUND_INSERT)  # with an optional level


class StagedSounds(NamedTuple):
    """Sound entries chained and made rows before the write lock (``Store.stage_sounds``), each
    site's links continuing the head that site had at this store's last commit. Under the lock
    ``append_sounds`` takes them where each site's head is still that one, and chains afresh
    where another writer chained since: the links are the same either way."""

    starts: dict[str, tuple[int, str]]  # each site's head the links continue
    ends: dict[str, tuple[int, str]]  # and the head they leave
    chain: list[tuple[str, int, str, str, str, str, int]]  # the chain rows, as link_all writes them
    rows: dict[str, list[tuple[Any, ...]]]  # each INSERT statement's rows (SoundEntry.insert)


def levels_digest(levels: SoundLevels, source: str) -> str:
    """The digest of ``levels`` stored with ``source``: what append_sounds chains for it."""
    return sound_entry(levels, source).digest


# the kinds stored in the readings table (their message kind, from the codec)
READING_KIND: dict[type, str] = {
    t: SENSOR_KINDS[t] for t in (LightSummary, WeatherReading, TurbidityReading, SensorStatus)
}

# a seismograph event's summaries in the readings table: the seismograph's own, the daemon's
SEISMIC_KINDS = ("seismic", "seismic-waveforms")
# the kinds of reading whose minutes are judged (a status heartbeat is not)
JUDGED_READING_KINDS = (
    *(kind for t, kind in READING_KIND.items() if t is not SensorStatus),
    *SEISMIC_KINDS,
)

# --------------------------------------------------------------------------- events <-> rows


def event_kind(event: Event) -> str:
    return event.kind if isinstance(event, GenericEvent) else EVENT_KINDS[type(event)]


def _audio_row(
    site: str, sensor: str, ts_us: int, seq: int, rate: int, fmt: str, pcm: bytes
) -> dict[str, Any]:
    """An audio block as its table's columns, in their order (what append_audio stores and chains)."""
    return {
        "site": site,
        "sensor": sensor,
        "ts_us": ts_us,
        "seq": seq,
        "sample_rate": rate,
        "format": fmt,
        "pcm": pcm,
    }


class _Duplicates(Exception):
    """Some rows of a multi-row insert were stored already."""


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append did: stored (new), or ignored as a duplicate / conflicting resend."""

    stored: bool
    conflict: str = ""  # a resend with the same identity but different content


# WAL frames (4 KiB pages) past which the checkpointer starts the WAL over in the writers'
# queue (Checkpointer.restart_in_turn): 256 MiB, ~15 s of a backlog's drain. The turn it
# takes holds both workers up while it copies the last frames, so it comes seldom: at
# 16,384 frames (once every ~4 s) the ratio at 600 per sensor leaned lower (docs/PERFORMANCE.md).
RESTART_FRAMES = 65536


def _open_turns(path: str) -> int:
    """The writers' queue beside a store (``Store.turns_path``): a file only locked, never written."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextmanager
def _writers_turn(path: str) -> Iterator[None]:
    """Hold the writers' turn on ``path`` (OSError if it cannot be opened or locked)."""
    fd = _open_turns(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # lets go of the turn


class Checkpointer(threading.Thread):
    """PASSIVE WAL checkpoints every ``interval_s`` on a connection of its own.

    A PASSIVE checkpoint copies the WAL into the database but never starts the WAL over:
    the next writer does, and only if it begins when every frame has been copied. Writers
    that take turns (Store.take_turns) begin back to back, so that moment never comes and
    the WAL grew through a long drain (621 MB beside a 517 MB store, bench/ingest.py at 2,000
    per sensor), every commit writing to new pages of the file. Once it holds ``restart_frames``
    frames, the checkpointer takes a turn of its own to copy the rest (restart_in_turn).
    """

    def __init__(self, path: str, interval_s: float, restart_frames: int = RESTART_FRAMES) -> None:
        super().__init__(name="minewatch-checkpoint", daemon=True)
        self.path = path
        self.interval_s = interval_s
        self.restart_frames = restart_frames
        self.turns: str | None = None  # the writers' queue, once the store takes turns
        self.restarts = 0  # the WAL started over (restart_in_turn)
        self._stop_event = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30, check_same_thread=False)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            rounds = FailingRounds(log, "WAL checkpoint")
            while not self._stop_event.wait(self.interval_s):
                try:
                    _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if self.turns is not None and frames >= self.restart_frames:
                        self.restart_in_turn(conn, self.turns)
                except (sqlite3.Error, OSError) as exc:  # busy or I/O: the next round retries
                    rounds.failed(exc)
                    continue
                rounds.worked()
            try:  # the last round, as the daemon stops: a store refusing writes ends no thread
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except (sqlite3.Error, OSError) as exc:
                log.warning("The last WAL checkpoint of %s failed: %s", self.path, exc)
        finally:
            conn.close()

    def restart_in_turn(self, conn: sqlite3.Connection, turns: str) -> bool:
        """Copy what is left of the WAL while holding the writers' turn, so that it starts over.

        No worker writes while the turn is held (they wait for it, holding no SQLite lock), so
        the checkpoint gets the write lock at once, copies the few frames written since the
        last round and waits briefly for readers; the next writer then begins the WAL at its
        first frame. A writer outside the queue (the CLI) or a long reader makes it give up
        after 0.1 s: the next round tries again. Whether the WAL will start over is returned.
        """
        with _writers_turn(turns):
            (patience_ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
            conn.execute("PRAGMA busy_timeout=100")
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(patience_ms)}")
        if busy:
            return False
        self.restarts += 1
        return True

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


def named_a_folder(path: str) -> str | None:
    """Why a folder named as the store is no store, for "cannot open the store ...: "; None for
    anything else. Looks only: for check-config and the store's readers as for the daemon."""
    target = Path(path)
    return f"it is a folder: name a file in it (e.g. {target / 'minewatch.db'})" if target.is_dir() else None


def _why_not_opened(path: str, exc: sqlite3.Error, patience_s: float, write: bool) -> str:
    """SQLite's "unable to open database file" or "database is locked", said as what it is
    where that can be told."""
    if isinstance(exc, sqlite3.OperationalError) and _locked(exc):
        return f"{exc}: another connection holds it (waited {patience_s:g} s)"
    if (folder := named_a_folder(path)) is not None:
        return folder
    return access_refused(path, write=write) or str(exc)


def access_refused(path: str, *, write: bool) -> str | None:
    """Why this user may not read the store at ``path`` (``write``: nor write it, as the daemon
    does): the first of its files, or to write, its folder (the nearest that exists, for a store
    not made yet), this user is refused, with what to do; None when none is. Looks only:
    check-config, the daemon and every command that reads the store say it in these words.
    os.access answers for this process: root without the capability to override file modes
    (setpriv) is refused as another user is."""
    refused = _first_refused(path, write=write)
    if refused is None:
        return None
    if write and _mounted_read_only(refused.place):  # no user may write it: said so, not "permission denied"
        return _read_only_mount(refused.place)
    if refused.folder:
        return _refused_folder(refused.place)
    return _refused_file(refused.place, "writable" if write else "readable")


class _Refused(NamedTuple):
    place: Path
    folder: bool  # the folder the -wal and -shm are made in, not one of the store's files


def _first_refused(path: str, *, write: bool) -> _Refused | None:
    """The first of the store's files, or its folder, this user may not read (``write``: nor
    write), as access_refused tells it; None when none is."""
    target = Path(path)
    if not target.exists():
        if not write:
            return None
        folder = next((p for p in target.parents if p.exists()), None)
        return _Refused(folder, True) if folder is not None and not os.access(folder, os.W_OK) else None
    mode = os.W_OK if write else os.R_OK
    # Beside the store, files of its own (a daemon's claim on its sites too) refuse it as the store does.
    files = (path, path + "-wal", path + "-shm", claims_path(path)) if write else (path,)
    for name in files:
        if os.path.exists(name) and not os.access(name, mode):
            return _Refused(Path(name), False)
    # The daemon makes the -wal and -shm in the folder, and a reader of a WAL store its -shm.
    makes_files = write or not os.path.exists(path + "-shm")
    return _Refused(target.parent, True) if makes_files and not os.access(target.parent, os.W_OK) else None


# The byte of a -shm every SQLite connection holds a shared lock on while it has the file open
# (os_unix.c: UNIX_SHM_DMS, after the WAL's eight lock bytes from 120).
_SHM_IN_USE_BYTE = 128


def remove_what_reading_made(path: str) -> None:
    """Remove the -wal and -shm beside the store at ``path`` that a reader of this user made and
    no connection has open any more. SQLite's last connection removes them as it closes, but
    only one that may write the store: a reader that may not (another user's store, 0644, in a
    folder it may write) left them, its own files, and the store's own user could no longer
    write the store ("attempt to write a readonly database"; `run` refused the -shm). Removed
    only while they are this user's, the -wal holds no frame (a reader writes none) and no
    connection holds the -shm (its lock byte, taken here, is held while the files go)."""
    shm, wal = path + "-shm", path + "-wal"
    try:
        fd = os.open(shm, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # none, or not this user's to take
        return
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return
        try:
            frames = os.lstat(wal)
        except FileNotFoundError:
            frames = None
        if frames is not None and (frames.st_size or frames.st_uid != os.geteuid()):
            return  # a writer's: it removes them
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_IN_USE_BYTE)
        except OSError:  # another connection has them open: theirs to remove
            return
        for name in (wal, shm):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
    finally:
        os.close(fd)  # lets go of the lock


def _refused_file(place: Path, able: str) -> str:
    return (
        f"{place} is not {able} by this user (permission denied): run minewatch as the user the"
        f" daemon runs as ({_owner(place)} owns the file), or give the file to that user"
    )


def _refused_folder(place: Path) -> str:
    return (
        f"{place} is not writable by this user (permission denied): run minewatch as a user that"
        " may write in it (the store's -wal and -shm are made there), or name a store in a folder"
        " of the daemon's user"
    )


def _read_only_mount(place: Path) -> str:
    return (
        f"{place} is on a file system mounted read-only: remount it read-write (the kernel mounts"
        " one so after a disk's errors: check the disk first), or name a store on a writable one"
    )


def _mounted_read_only(place: Path) -> bool:
    try:
        return bool(os.statvfs(place).f_flag & os.ST_RDONLY)
    except OSError:  # gone since it was looked at
        return False


def _owner(place: Path) -> str:
    """The name of the user owning ``place`` (quoted), its uid where no name is known."""
    try:
        uid = place.stat().st_uid
    except OSError:  # gone since it was looked at
        return "another user"
    try:
        return repr(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return f"uid {uid}"


# How long opening a store is tried again while SQLite answers "database is locked" at once.
_OPEN_PATIENCE_S = 30.0

T = TypeVar("T")


def _locked(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for another connection's lock (SQLITE_BUSY), not for a fault."""
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
        "locked" in str(exc)
    )


def open_patiently(
    path: str, open_: Callable[[], T], *, what: str = "", patience_s: float = _OPEN_PATIENCE_S
) -> T:
    """``open_()``, a connection to the store's file made and set up (closed by ``open_`` if it
    raises), tried again while SQLite answers "database is locked", for ``patience_s``: the
    rule of every connection of the daemon's start to the store. StoreError, one line naming
    the file (and ``what`` opens it) and why, once the patience is spent or for any other fault.

    Two processes opening one new store at one moment (two daemons of other sites of it) can
    meet where SQLite answers "database is locked" at once rather than waiting (its change to
    WAL, a lock it would otherwise deadlock on): the open is tried again, for as long as a
    writer is waited for anyway."""
    patience = time.monotonic() + patience_s
    while True:
        try:
            return open_()
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and _locked(exc) and time.monotonic() < patience:
                time.sleep(0.05)
                continue
            raise StoreError(cannot_open(path, exc, what=what, patience_s=patience_s)) from exc


def cannot_open(
    path: str,
    exc: sqlite3.Error,
    *,
    what: str = "",
    patience_s: float = _OPEN_PATIENCE_S,
    write: bool = True,
) -> str:
    """The refusal of a store a connection could not open (``exc``), in one line: the daemon's
    (``write``), which check-config says of a store this user cannot read, and the reading
    commands' (not ``write``: a store they may not read)."""
    return store_not_opened(path, _why_not_opened(path, exc, patience_s, write), what=what)


def store_not_opened(path: str, why: str, *, what: str = "") -> str:
    """The line of every refusal of a store's file: cannot open the store '...': ``why``."""
    for_what = f" ({what})" if what else ""
    return f"cannot open the store {path!r}{for_what}: {why}"


def cannot_write(path: str) -> str | None:
    """Why the daemon, run as this user, could not write the store at ``path`` that it can
    read (access_refused), in one line; None when it could. For check-config: `run` takes
    such a store and then fails on every write."""
    why = access_refused(path, write=True)
    return None if why is None else f"cannot write the store {path!r}: {why}"


def folder_blocked(path: str) -> str | None:
    """Why the store's folder cannot be made, where a file stands where a folder of it should be
    (notes.txt/minewatch.db); None otherwise. Looks only: for check-config as for the daemon."""
    blocking = next((p for p in Path(path).parents if p.exists() or p.is_symlink()), None)
    if blocking is None or blocking.is_dir():
        return None
    return f"cannot make the folder of the store {path!r}: {blocking} is a file, not a folder"


def _make_folder_of(path: str) -> None:
    """The store's folder, made if missing; one that cannot be (a file where a folder of it
    should be: it was "minewatch run: /etc/passwd: File exists") is a StoreError naming why."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocked = folder_blocked(path) if isinstance(exc, FileExistsError | NotADirectoryError) else None
        why = blocked or f"cannot make the folder of the store {path!r}: {exc.filename}: {exc.strerror}"
        raise StoreError(why) from None


def store_file_refusal(conn: sqlite3.Connection, path: str, *, made_here: bool = False) -> str | None:
    """The refusal (not_a_store) of the file at ``path``, open as ``conn``, when it is no
    minewatch store: another program's database or a sensor's queue (someone_elses), or a file
    minewatch did not make as a store (not_a_stores_making; skipped when the caller has just
    made it, ``made_here``). None for a store. Reads only: the daemon's Store and the commands'
    store_file judge a file by this before anything writes to it."""
    # A store has its migrations' record, or (made before the record) its chain.
    foreign = someone_elses(conn, (migrations.TABLE, "chain"))
    if foreign is None and not made_here:
        foreign = not_a_stores_making(conn, path)
    return None if foreign is None else not_a_store(path, foreign)


def _make_store_file(path: str) -> None:
    """A new store's file, marked as the store's (STORE_APPLICATION_ID) and in WAL mode before
    its name appears (linked from a file of this process's own): another process opening the
    store at that moment finds a store being made, never an empty file or a database with no
    tables and no mark, both refused as files minewatch did not make. Where the folder refuses
    (no hard links, read-only) nothing is made here: SQLite makes it as it opens it.

    Ctrl-C and SIGTERM wait for its few milliseconds: one while it ran (`run` starting, before
    its own handler) left ``{path}.new-PID`` behind."""
    own = f"{path}.new-{os.getpid()}"
    with interrupts_held():
        try:
            conn = sqlite3.connect(own)
            try:
                conn.execute(f"PRAGMA application_id={STORE_APPLICATION_ID}")
                conn.execute("PRAGMA journal_mode=WAL")
            finally:
                conn.close()
            with contextlib.suppress(FileExistsError):  # another process made it at this moment
                os.link(own, path)
        except (OSError, sqlite3.Error):
            pass
        finally:
            for leftover in (own, own + "-wal", own + "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)


class Store:
    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        self.path = str(path)
        self._made = self.path == ":memory:" or not os.path.lexists(self.path)
        if self.path != ":memory:":
            _make_folder_of(self.path)
            if self._made:
                _make_store_file(self.path)

        def attempt() -> None:
            try:
                self._open(synchronous)
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error, AttributeError):
                    self.conn.close()
                raise

        open_patiently(self.path, attempt)
        self._max_variables = self.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        self._statements: dict[tuple[str, int], str] = {}
        self._heads: dict[str, tuple[int, str]] = {}
        # Each site's head as of this store's last commit: where stage_sounds' links start.
        self._committed_heads: dict[str, tuple[int, str]] = {}
        self._pending_chain: list[tuple[str, int, str, str, str, str, int]] = []  # written at commit
        self._in_batch = False
        # Rollbacks so far (of a batch or a savepoint): what was read inside one may be gone, and
        # its rowids given again, so a cache of rows read since (the daemon's status) reloads.
        self.rollbacks = 0
        self._checkpointer: Checkpointer | None = None
        self._turns: int | None = None  # the descriptor of the writers' queue (take_turns)

    def _open(self, synchronous: str) -> None:
        """Connect, refuse another program's database, set the connection up and migrate."""
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.conn.row_factory = sqlite3.Row
        # Before anything writes (WAL mode rewrites the header): another program's database
        # named by mistake is left as it is, and so is a file the user made (`touch`).
        refusal = store_file_refusal(self.conn, self.path, made_here=self._made)
        if refusal is not None:
            self.conn.close()
            raise StoreError(refusal)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit survives power loss too; the pipeline batches commits so it is affordable.
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        # 16 MiB of page cache (default 2): measured with layout 1, whose batches touched pages
        # all over the per-sensor keys; kept for the readings' keys, not re-measured since.
        self.conn.execute("PRAGMA cache_size=-16384")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _migrate(self) -> None:
        """Apply the migrations the store has not had yet (monitor/journal/migrations.py), each once."""
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(migrations.newer_layout(self.path, version))
        if not migrations.pending(self.conn):
            return
        # Migrating is a write, which the commands that read the store make too (status brings
        # an older store up to date): as a user who may only read it, refused in run's words
        # before the writers' turn's file is made beside it (it stayed, and the migration failed
        # as "cannot open the store").
        if self.path != ":memory:" and (refused := cannot_write(self.path)) is not None:
            self.conn.close()
            raise StoreError(f"{refused} (an older minewatch's store: opening it brings it to this layout)")
        # Two processes opening a new store at one moment (two daemons of other sites of it)
        # would both find it unmigrated and the second fail ("duplicate column"): whoever
        # migrates holds the writers' turn, and what is still to do is read again under it.
        with ExitStack() as turn:
            if self.path != ":memory:":
                try:
                    turn.enter_context(_writers_turn(self.turns_path))
                except OSError as exc:  # a read-only folder, no locks here: migrate as before the turn
                    log.warning("cannot take the writers' turn on %s to migrate: %s", self.turns_path, exc)
            ran = migrations.apply(self.conn)
            if ran and migrations.applied(self.conn) != ran:  # not a new store
                log.info("migrated the store %s: %s", self.path, ", ".join(ran))
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def checkpoint_in_background(self, interval_s: float = 1.0, restart_frames: int = RESTART_FRAMES) -> None:
        """Copy the WAL into the database from a thread of its own instead of at commits.

        SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold,
        holding up the pipeline for the whole copy; a checkpoint statement in another
        thread runs with the GIL released, beside the pipeline.
        """
        if self._checkpointer is None and self.path != ":memory:":
            self._checkpointer = Checkpointer(self.path, interval_s, restart_frames)
            if self._turns is not None:
                self._checkpointer.turns = self.turns_path
            self._checkpointer.start()
            self.conn.execute("PRAGMA wal_autocheckpoint=0")

    @property
    def turns_path(self) -> str:
        """The file the workers queue on for the write lock (take_turns), beside the store."""
        return self.path + "-turns"

    def take_turns(self) -> None:
        """Queue for the write lock with the other processes that call this (the daemon's workers).

        BEGIN IMMEDIATE waits for the write lock in SQLite's busy handler, which sleeps 1, 2, 5,
        10, 15, 20, 25 ms... between tries: a worker whose turn came kept sleeping while the
        other prepared its next batch. A lock on a file beside the store wakes the one waiting
        as soon as the holder lets go (bench/write_turns.py: 1.17x the batches when the writers
        want the lock more than it is free). Writers that do not take turns (the CLI) still
        wait in SQLite's busy handler, whose lock is the one that guards the store.
        """
        if self._turns is not None or self.path == ":memory:":
            return
        try:
            turns = _open_turns(self.turns_path)
        except OSError as exc:  # SQLite's lock still keeps the writers apart, only less promptly
            log.warning("cannot queue for the store's write lock on %s: %s", self.turns_path, exc)
            return
        self._turns = turns
        if self._checkpointer is not None:
            self._checkpointer.turns = self.turns_path

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction: everything inside commits together, or nothing does."""
        if self._in_batch:
            yield
            return
        self._in_batch = True
        try:
            if self._turns is not None:
                fcntl.flock(self._turns, fcntl.LOCK_EX)
            self.conn.execute("BEGIN IMMEDIATE")
            # Another process (the `notices` CLI) may have chained records since our last
            # batch: re-read each head (lazily, one indexed query per site) under the write lock.
            self._heads.clear()
            yield
            self._flush_chain()
            self.conn.execute("COMMIT")
            self._committed_heads.update(self._heads)
        except BaseException:
            self.rollbacks += 1
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            self._pending_chain.clear()
            self._heads.clear()  # chain heads cached during the batch may be gone
            self._committed_heads.clear()
            raise
        finally:
            self._in_batch = False
            if self._turns is not None:
                fcntl.flock(self._turns, fcntl.LOCK_UN)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested unit inside a batch: on error only its own writes are undone."""
        heads = dict(self._heads)
        pending = len(self._pending_chain)
        self.conn.execute("SAVEPOINT unit")
        try:
            yield
        except BaseException:
            self.rollbacks += 1
            self.conn.execute("ROLLBACK TO unit")
            self.conn.execute("RELEASE unit")
            self._heads = heads
            del self._pending_chain[pending:]
            raise
        self.conn.execute("RELEASE unit")

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        if self._turns is not None:
            os.close(self._turns)
            self._turns = None
        self.conn.close()

    # ------------------------------------------------------------------ chain

    def head(self, site: str) -> tuple[int, str]:
        cached = self._heads.get(site)
        if cached is None:
            cached = self._heads[site] = self._last_head(site)
        return cached

    def _last_head(self, site: str) -> tuple[int, str]:
        row = self.conn.execute(
            "SELECT seq, head FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1", (site,)
        ).fetchone()
        return (row["seq"], row["head"]) if row else (0, GENESIS)

    def chain(self, site: str, kind: str, key: str, record: Mapping[str, Any], now: datetime) -> int:
        """Append a record to its site's chain; returns the entry's seq."""
        return self.link(site, kind, key, digest_of(record), to_us(now))

    def chain_row(self, site: str, kind: str, row: Mapping[str, Any], now: datetime) -> int:
        """Chain a row of ``kind`` under its key, as its record (monitor/journal/chain_kinds.py's KINDS)."""
        spec = KINDS[kind]
        return self.chain(site, kind, spec.key_of(row), spec.record(row), now)

    def link(self, site: str, kind: str, key: str, digest: str, now_us: int) -> int:
        """Chain a record by its digest (see chain)."""
        return self.link_all(kind, [(site, key, digest)], now_us)[0]

    def link_all(self, kind: str, entries: Iterable[tuple[str, str, str]], now_us: int) -> list[int]:
        """Chain (site, key, digest) records of one kind in order; returns their seqs."""
        heads, pending, seqs = self._heads, self._pending_chain, []
        for site, key, digest in entries:
            seq, previous = heads.get(site) or self.head(site)
            head = next_head(previous, digest)
            seq += 1
            # Chain rows are written in one statement at commit (see batch); the head is cached.
            pending.append((site, seq, kind, key, digest, head, now_us))
            heads[site] = (seq, head)
            seqs.append(seq)
        if not self._in_batch:
            self._flush_chain()
        return seqs

    def _flush_chain(self) -> None:
        if self._pending_chain:
            self._insert_rows(
                "INSERT INTO chain (site, seq, kind, key, digest, head, recorded_us) VALUES ",
                self._pending_chain,
            )
            self._pending_chain.clear()

    def _insert_rows(self, head: str, rows: Sequence[Sequence[Any]]) -> int:
        """``head`` + many rows of values, as a few multi-row INSERT statements; returns how many
        rows they inserted (not counting what triggers wrote: sound_hours' on sound).

        SQLite runs one statement in one step, with the GIL released throughout, so the
        network thread decodes the next messages meanwhile; executemany takes the GIL
        back for every row. Statement sizes are powers of two (or the largest the
        variable limit allows), so only a few distinct statements are ever prepared.
        """
        if not rows:
            return 0
        width = len(rows[0])
        largest = min(2048, self._max_variables // width)
        done = inserted = 0
        while done < len(rows):
            left = len(rows) - done
            size = largest if left >= largest else 1 << (left.bit_length() - 1)
            sql = self._statements.get((head, size))
            if sql is None:
                values = "(" + ",".join("?" * width) + ")"
                sql = self._statements[(head, size)] = head + ",".join([values] * size)
            inserted += self.conn.execute(
                sql, list(itertools.chain.from_iterable(rows[done : done + size]))
            ).rowcount
            done += size
        return inserted

    # ------------------------------------------------------------------ appends

    def append_sound(self, levels: SoundLevels, *, source: str, late: bool, now: datetime) -> Appended:
        return Appended(self.append_sounds([(levels, source, late)], now)[0])

    def stage_sounds(
        self, entries: Sequence[SoundEntry], lates: Sequence[bool], now: datetime
    ) -> StagedSounds:
        """``entries`` (with their ``late``) chained and made rows ahead of the write lock, for
        ``append_sounds``, from each site's head at this store's last commit: the chain's SHA-256
        heads and the rows' tuples are then not built while the other workers wait for the lock
        (docs/PERFORMANCE.md)."""
        return self._chain_sounds(
            entries, lates, to_us(now), lambda site: self._committed_heads.get(site) or self._last_head(site)
        )

    def _chain_sounds(
        self,
        entries: Sequence[SoundEntry],
        lates: Sequence[bool],
        now_us: int,
        head_of: Callable[[str], tuple[int, str]],
    ) -> StagedSounds:
        """``entries`` chained on from each site's ``head_of`` (its entry's seq is a column of
        its row), and their rows by the INSERT statement that takes them (SoundEntry.insert)."""
        starts: dict[str, tuple[int, str]] = {}
        heads: dict[str, tuple[int, str]] = {}
        chain: list[tuple[str, int, str, str, str, str, int]] = []
        rows: dict[str, list[tuple[Any, ...]]] = {
            _SOUND_INSERT_SHORT: [],
            _SOUND_INSERT: [],
            _SOUND_INSERT_OVERLOAD: [],
        }
        for e, late in zip(entries, lates, strict=True):
            site = e.site
            current = heads.get(site)
            if current is None:
                current = starts[site] = head_of(site)
            seq, head = current[0] + 1, next_head(current[1], e.digest)
            heads[site] = (seq, head)
            chain.append((site, seq, "sound", e.key, e.digest, head, now_us))
            rows[e.insert].append((*e.values, int(late), now_us, seq))
        return StagedSounds(starts, heads, chain, rows)

    def append_sounds(
        self,
        items: Sequence[tuple[SoundLevels, str, bool]],
        now: datetime,
        entries: Sequence[SoundEntry | None] | None = None,
        staged: StagedSounds | None = None,
    ) -> list[bool]:
        """Many (levels, source, late) at once; returns which were new (the rest are duplicates).

        ``entries``: each item's ``sound_entry`` where the caller has built it already (None: built here).
        ``staged``: those entries' ``stage_sounds``, taken where no other writer chained since.

        Optimistic: all rows in multi-row statements, and only when fewer rows were inserted
        than given (a duplicate among them) is it undone and redone row by row to learn which.
        """
        now_us = to_us(now)
        given = entries or [None] * len(items)
        ready = [
            sound_entry(levels, source) if e is None else e
            for (levels, source, _), e in zip(items, given, strict=True)
        ]
        try:
            with self.savepoint():
                if staged is None or any(self.head(s) != start for s, start in staged.starts.items()):
                    # none staged, or another writer chained since: chained on from the heads now
                    staged = self._chain_sounds(ready, [late for *_, late in items], now_us, self.head)
                self._pending_chain.extend(staged.chain)
                self._heads.update(staged.ends)
                if not self._in_batch:
                    self._flush_chain()
                rows = staged.rows
                # The statements' own row counts: total_changes would count the triggers' too.
                inserted = sum(self._insert_rows(insert, given) for insert, given in rows.items())
                if inserted != len(ready):
                    raise _Duplicates
            return [True] * len(ready)
        except _Duplicates:
            pass
        stored = []
        for e, (_, _, late) in zip(ready, items, strict=True):
            seq = self.head(e.site)[0] + 1
            new = self._insert_rows(e.insert, [(*e.values, int(late), now_us, seq)]) == 1
            if new:
                self.link(e.site, "sound", e.key, e.digest, now_us)
            stored.append(new)
        return stored

    def append_reading(
        self,
        reading: LightSummary | WeatherReading | TurbidityReading | SensorStatus,
        payload: Mapping[str, Any],
        *,
        late: bool,
        now: datetime,
    ) -> Appended:
        kind = {
            LightSummary: "light",
            WeatherReading: "weather",
            TurbidityReading: "turbidity",
            SensorStatus: "status",
        }[type(reading)]
        duration = getattr(reading, "duration_s", 0.0)
        row = {
            "site": reading.site,
            "sensor": reading.sensor,
            "kind": kind,
            "ts_us": to_us(reading.ts),
            "duration_s": duration,
            "data": canonical_text(payload, ascii=True),
        }
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO readings (site, sensor, kind, ts_us, duration_s, data, late, received_us)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (*row.values(), int(late), to_us(now)),
        )
        if cur.rowcount == 0:
            return Appended(False)
        self.chain_row(reading.site, "reading", row, now)
        return Appended(True)

    def append_audio(
        self, site: str, sensor: str, ts: datetime, seq: int, rate: int, fmt: str, pcm: bytes, now: datetime
    ) -> Appended:
        row = _audio_row(site, sensor, to_us(ts), seq, rate, fmt, pcm)
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO audio (site, sensor, ts_us, seq, sample_rate, format, pcm, received_us)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (*row.values(), to_us(now)),
        )
        if cur.rowcount == 0:
            return Appended(False)
        self.chain_row(site, "audio", row, now)
        return Appended(True)

    def append_waveform(self, chunk: WaveformChunk, now: datetime) -> Appended:
        """A seismograph waveform chunk (kept whole: the event is recomputed from it)."""
        row = {
            "site": chunk.site,
            "sensor": chunk.sensor,
            "event_id": chunk.event_id,
            "chunk": chunk.chunk,
            "chunks": chunk.chunks,
            "ts_us": to_us(chunk.ts),
            "header": canonical_text(chunk.header(), ascii=True),
            "samples": chunk.data,
        }
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO waveforms (site, sensor, event_id, chunk, chunks, ts_us, header, samples,"
            " received_us) VALUES (?,?,?,?,?,?,?,?,?)",
            (*row.values(), to_us(now)),
        )
        if cur.rowcount == 0:
            kept = self.conn.execute(
                "SELECT header, samples FROM waveforms"
                " WHERE site = ? AND sensor = ? AND event_id = ? AND chunk = ?",
                (chunk.site, chunk.sensor, chunk.event_id, chunk.chunk),
            ).fetchone()
            if kept is not None and (kept["header"], bytes(kept["samples"])) != (row["header"], chunk.data):
                return Appended(
                    False,
                    f"chunk: {chunk.chunk} of event {chunk.event_id!r} is already recorded"
                    " with different content",
                )
            return Appended(False)
        self.chain_row(chunk.site, "waveform", row, now)
        return Appended(True)

    def waveform_event(self, site: str, sensor: str, event_id: str) -> tuple[int, str | None]:
        """(chunks held, the lowest one's header as stored) of an event, without their samples."""
        count, header = self.conn.execute(
            "SELECT COUNT(*), (SELECT header FROM waveforms WHERE site = ?1 AND sensor = ?2"
            " AND event_id = ?3 ORDER BY chunk LIMIT 1)"
            " FROM waveforms WHERE site = ?1 AND sensor = ?2 AND event_id = ?3",
            (site, sensor, event_id),
        ).fetchone()
        return int(count), header

    def waveform_chunks(self, site: str, sensor: str, event_id: str) -> list[sqlite3.Row]:
        """An event's waveform chunks in order (header as stored, samples)."""
        return list(
            self.conn.execute(
                "SELECT chunk, chunks, ts_us, header, samples FROM waveforms"
                " WHERE site = ? AND sensor = ? AND event_id = ? ORDER BY chunk",
                (site, sensor, event_id),
            )
        )

    def append_seismic(
        self,
        site: str,
        sensor: str,
        kind: str,
        ts: datetime,
        duration_s: float,
        payload: Mapping[str, Any],
        now: datetime,
    ) -> Appended:
        """A seismograph event's summary as a reading: the seismograph's own ("seismic") or the
        daemon's from the waveforms ("seismic-waveforms"); chained as a reading."""
        assert kind in SEISMIC_KINDS
        row = {
            "site": site,
            "sensor": sensor,
            "kind": kind,
            "ts_us": to_us(ts),
            "duration_s": duration_s,
            "data": canonical_text(payload, ascii=True),
        }
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO readings (site, sensor, kind, ts_us, duration_s, data, late, received_us)"
            " VALUES (?,?,?,?,?,?,0,?)",
            (*row.values(), to_us(now)),
        )
        if cur.rowcount == 0:
            kept = self.conn.execute(
                "SELECT data FROM readings WHERE site = ? AND sensor = ? AND kind = ? AND ts_us = ?",
                (site, sensor, kind, row["ts_us"]),
            ).fetchone()
            if kept is not None and kept["data"] != row["data"]:
                return Appended(
                    False, f"ts: a {kind} summary at this time is already recorded with other content"
                )
            return Appended(False)
        self.chain_row(site, "reading", row, now)
        return Appended(True)

    def seismic_between(self, site: str, start: datetime, end: datetime) -> list[sqlite3.Row]:
        """The seismic summaries (both kinds) of events starting in [start, end), in time order."""
        return list(
            self.conn.execute(
                "SELECT * FROM readings INDEXED BY readings_by_kind"
                " WHERE site = ? AND kind IN ('seismic', 'seismic-waveforms')"
                " AND ts_us >= ? AND ts_us < ? ORDER BY ts_us, kind",
                (site, to_us(start), to_us(end)),
            )
        )

    def seismic_rows(
        self, site: str, sensor: str | None = None, *, among: Sequence[str] | None = None
    ) -> list[sqlite3.Row]:
        """Every seismic summary of the site (or one seismograph, or those ``among`` the
        seismographs named), in time order (blast reports, the site law). Naming the sensors
        lets SQLite use the key (site, sensor, kind, ts_us) instead of reading every reading of
        the site, which the daemon's early warnings did once a tick."""
        names = [sensor] if sensor is not None else list(among) if among is not None else None
        if names is None:
            return list(
                self.conn.execute(
                    "SELECT * FROM readings INDEXED BY readings_by_kind"
                    " WHERE site = ? AND kind IN ('seismic', 'seismic-waveforms')"
                    " ORDER BY ts_us, kind",
                    (site,),
                )
            )
        marks = ",".join("?" * len(names))
        return list(
            self.conn.execute(
                f"SELECT * FROM readings WHERE site = ? AND sensor IN ({marks})"
                " AND kind IN ('seismic', 'seismic-waveforms') ORDER BY ts_us, kind",
                (site, *names),
            )
        )

    def blast_history(
        self,
        site: str,
        locations: Mapping[str, str],
        *,
        seismic: bool = True,
        seismographs: Sequence[str] | None = None,
    ) -> tuple[list[SeismicEvent], list[Event]]:
        """Every seismograph event (unless ``seismic`` is False), blast and blast notice of the
        site, in time order: its own blasting record (monitor/journal/site_law.py)."""
        events = [
            event_from_row(r["kind"], r["data"], site)
            for r in self.conn.execute(
                "SELECT kind, data FROM events WHERE site = ? AND kind IN ('blast', 'blast-notice')"
                " ORDER BY ts_us",
                (site,),
            )
        ]
        rows = self.seismic_rows(site, among=seismographs) if seismic else []
        return seismic_events(rows, locations), events

    def append_event(self, event: Event, payload: Mapping[str, Any], now: datetime) -> Appended:
        kind = event_kind(event)
        span = event_span(event)
        data = canonical_text(payload, ascii=True)
        row = {
            "site": event.site,
            "kind": kind,
            "id": event.id,
            "ts_us": to_us(span.since),
            "end_us": to_us(span.end) if span.end else None,
            "data": data,
        }
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO events (site, kind, id, ts_us, end_us, data, received_us)"
            " VALUES (?,?,?,?,?,?,?)",
            (*row.values(), to_us(now)),
        )
        if cur.rowcount == 0:
            existing = queries.event_data(self.conn, event.site, kind, event.id)
            if existing is not None and existing != data:
                return Appended(False, f"id: {kind} {event.id!r} is already recorded with different content")
            return Appended(False)
        self.chain_row(event.site, "event", row, now)
        return Appended(True)

    def append_finding(self, finding: Finding, now: datetime, *, retracted: bool = False) -> bool:
        """Store a finding; a re-evaluation that changes it adds a revision.

        Returns True if anything changed.
        """
        data = canonical_text(finding_to_json(finding), ascii=True)
        last = self.conn.execute(
            "SELECT revision, data, retracted FROM findings WHERE id = ? ORDER BY revision DESC LIMIT 1",
            (finding.id,),
        ).fetchone()
        if last is not None and last["data"] == data and bool(last["retracted"]) == retracted:
            return False
        if last is None and retracted:
            return False
        revision = 1 if last is None else last["revision"] + 1
        row = {
            "id": finding.id,
            "revision": revision,
            "site": finding.site,
            "standard": finding.standard,
            "section": finding.section,
            "kind": finding.kind.value,
            "start_us": to_us(finding.start),
            "end_us": to_us(finding.end),
            "retracted": int(retracted),
            "data": data,
        }
        self.conn.execute(
            "INSERT INTO findings (id, revision, site, standard, section, kind, start_us, end_us, retracted,"
            " data,"
            " created_us) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (*row.values(), to_us(now)),
        )
        self.chain_row(finding.site, "finding", row, now)
        return True

    def current_findings(self, site: str, start: datetime, end: datetime) -> list[sqlite3.Row]:
        """Latest revision of each finding starting in [start, end), retracted ones excluded."""
        return queries.current_findings(self.conn, site=site, start=start, end=end)

    def append_rejection(self, site: str, topic: str, reason: str, excerpt: str, now: datetime) -> int:
        """Store and chain a rejected message; returns its row id (its InfluxDB point's too)."""
        cur = self.conn.execute(
            "INSERT INTO rejections (site, topic, reason, excerpt, received_us) VALUES (?,?,?,?,?)",
            (site, topic, reason, excerpt, to_us(now)),
        )
        self.chain_row(
            site,
            "rejection",
            {
                "id": cur.lastrowid,
                "site": site,
                "topic": topic,
                "reason": reason,
                "excerpt": excerpt,
                "received_us": to_us(now),
            },
            now,
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def append_portal_action(
        self,
        site: str,
        actor: str,
        role: str,
        action: str,
        target: str,
        source: str,
        data: Mapping[str, Any],
        now: datetime,
    ) -> int:
        """A person's action through the portal, chained; returns its id."""
        body = canonical_text(dict(data))
        cursor = self.conn.execute(
            "INSERT INTO portal_actions (site, ts_us, actor, role, action, target, source, data)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (site, to_us(now), actor, role, action, target, source, body),
        )
        row_id = int(cursor.lastrowid or 0)
        row = {
            "id": row_id,
            "site": site,
            "ts_us": to_us(now),
            "actor": actor,
            "role": role,
            "action": action,
            "target": target,
            "source": source,
            "data": body,
        }
        self.chain_row(site, "portal_action", row, now)
        return row_id

    def append_alert(
        self,
        alert_id: str,
        site: str,
        audience: str,
        kind: str,
        severity: str,
        condition: str,
        message: str,
        data: Mapping[str, Any],
        now: datetime,
    ) -> bool:
        body = canonical_text(data, ascii=True)
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO alerts (id, site, audience, kind, severity, condition, message, data,"
            " created_us)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (alert_id, site, audience, kind, severity, condition, message, body, to_us(now)),
        )
        if cur.rowcount == 0:
            return False
        self.chain_row(
            site,
            "alert",
            {
                "id": alert_id,
                "site": site,
                "audience": audience,
                "kind": kind,
                "severity": severity,
                "condition": condition,
                "message": message,
                "data": body,
                "created_us": to_us(now),
            },
            now,
        )
        return True

    def append_health(
        self,
        site: str,
        sensor: str,
        ts: datetime,
        state: str,
        gap_s: float | None,
        detail: str,
        now: datetime,
    ) -> None:
        ts_us = to_us(ts)
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO health (site, sensor, ts_us, state, gap_s, detail) VALUES (?,?,?,?,?,?)",
            (site, sensor, ts_us, state, gap_s, detail),
        )
        if cur.rowcount:
            self.chain_row(
                site,
                "health",
                {
                    "site": site,
                    "sensor": sensor,
                    "ts_us": ts_us,
                    "state": state,
                    "gap_s": gap_s,
                    "detail": detail,
                },
                now,
            )

    def append_calibration(
        self,
        site: str,
        sensor: str,
        ts: datetime,
        reference_db: float,
        measured_db: float,
        drift_db: float | None,
        flagged: bool,
        now: datetime,
    ) -> None:
        ts_us = to_us(ts)
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO calibration (site, sensor, ts_us, reference_db, measured_db, drift_db,"
            " flagged)"
            " VALUES (?,?,?,?,?,?,?)",
            (site, sensor, ts_us, reference_db, measured_db, drift_db, int(flagged)),
        )
        if cur.rowcount:
            self.chain_row(
                site,
                "calibration",
                {
                    "site": site,
                    "sensor": sensor,
                    "ts_us": ts_us,
                    "reference_db": reference_db,
                    "measured_db": measured_db,
                    "drift_db": drift_db,
                    "flagged": flagged,
                },
                now,
            )

    # ------------------------------------------------------------------ conflicting resends
    # A reading is identified by site, sensor, (kind) and time; the first one kept stands.
    # A resend with other content is journaled with both digests (the kept record's chain
    # digest, the resend's as it would have been chained) as a chain record of its own.

    def sound_conflict(self, levels: SoundLevels, source: str, now: datetime) -> bool:
        """Journal ``levels`` as a conflict if the kept row of its second differs; True if it does."""
        ts_us = to_us(levels.ts)
        kept = self.conn.execute(
            "SELECT s.*, c.digest AS chained FROM sound s LEFT JOIN chain c"
            " ON c.site = s.site AND c.seq = s.chain_seq WHERE s.site = ? AND s.ts_us = ? AND s.sensor = ?",
            (levels.site, ts_us, levels.sensor),
        ).fetchone()
        if kept is None:
            return False
        first = kept["chained"] or digest_of(sound_record(kept))
        second = levels_digest(levels, source)
        return self._conflict(levels.site, levels.sensor, "sound", ts_us, first, second, now)

    def reading_conflict(
        self,
        reading: LightSummary | WeatherReading | TurbidityReading | SensorStatus,
        payload: Mapping[str, Any],
        now: datetime,
    ) -> bool:
        """As sound_conflict, for a reading that append_reading found already kept."""
        kind = READING_KIND[type(reading)]
        ts_us = to_us(reading.ts)
        row = {
            "site": reading.site,
            "sensor": reading.sensor,
            "kind": kind,
            "ts_us": ts_us,
            "duration_s": getattr(reading, "duration_s", 0.0),
            "data": canonical_text(payload, ascii=True),
        }
        first = self._chained_digest(reading.site, "reading", KINDS["reading"].key_of(row))
        if first is None:  # kept earlier in this batch: its chain entry is not written yet
            kept = self.conn.execute(
                "SELECT * FROM readings WHERE site = ? AND sensor = ? AND kind = ? AND ts_us = ?",
                (reading.site, reading.sensor, kind, ts_us),
            ).fetchone()
            if kept is None:
                return False
            first = digest_of(KINDS["reading"].record(kept))
        second = digest_of(KINDS["reading"].record(row))
        return self._conflict(reading.site, reading.sensor, kind, ts_us, first, second, now)

    def audio_conflict(
        self, site: str, sensor: str, ts: datetime, seq: int, rate: int, fmt: str, pcm: bytes, now: datetime
    ) -> bool:
        """As sound_conflict, for an audio block that append_audio found already kept."""
        ts_us = to_us(ts)
        first = self._chained_digest(site, "audio", KINDS["audio"].key_of({"sensor": sensor, "ts_us": ts_us}))
        if first is None:  # kept earlier in this batch: its chain entry is not written yet
            kept = self.conn.execute(
                "SELECT * FROM audio WHERE site = ? AND sensor = ? AND ts_us = ?", (site, sensor, ts_us)
            ).fetchone()
            if kept is None:
                return False
            first = digest_of(KINDS["audio"].record(kept))
        record = KINDS["audio"].record(_audio_row(site, sensor, ts_us, seq, rate, fmt, pcm))
        return self._conflict(site, sensor, "audio", ts_us, first, digest_of(record), now)

    def _chained_digest(self, site: str, kind: str, key: str) -> str | None:
        entry = queries.chain_entry(self.conn, site, kind, key)
        return None if entry is None else entry.digest

    def _conflict(
        self, site: str, sensor: str, kind: str, ts_us: int, first: str, second: str, now: datetime
    ) -> bool:
        if first == second:
            return False  # a true duplicate
        row = {
            "site": site,
            "sensor": sensor,
            "kind": kind,
            "ts_us": ts_us,
            "first_digest": first,
            "second_digest": second,
            "received_us": to_us(now),
        }
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO conflicts (site, sensor, kind, ts_us, first_digest, second_digest,"
            " received_us) VALUES (?,?,?,?,?,?,?)",
            tuple(row.values()),
        )
        if cur.rowcount:  # the same second version resent again is journaled once
            self.chain_row(site, "conflict", row, now)
        return True

    def conflict_counts(self, site: str) -> dict[str, int]:
        """Conflicting resends journaled per sensor of ``site``."""
        return {
            str(r[0]): int(r[1])
            for r in self.conn.execute(
                "SELECT sensor, COUNT(*) FROM conflicts WHERE site = ? GROUP BY sensor ORDER BY sensor",
                (site,),
            )
        }

    def append_config_record(
        self, site: str, profile: str, profile_text: str, config_text: str, now: datetime
    ) -> None:
        """Chain the profile and configuration (its evidence allow-list) a site runs under, at start-up.

        The texts are kept by digest in ``meta`` so an evidence export can include the
        very files the record names; ``restate_config`` chains the record again after
        every anchor, so each evidence segment (which starts just after one) holds it.
        """
        row = {
            "profile": profile,
            "profile_sha256": hashlib.sha256(profile_text.encode()).hexdigest(),
            "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
            "since_us": to_us(now),
        }
        self.set_meta(f"text:{row['profile_sha256']}", profile_text)
        self.set_meta(f"text:{row['config_sha256']}", config_text)
        self.set_meta(f"config:{site}", json.dumps(row))
        self.chain_row(site, "config", row, now)

    def restate_config(self, site: str, now: datetime) -> None:
        """Chain the site's current config record again (see append_config_record)."""
        text = self.meta(f"config:{site}")
        if text is not None:
            row = json.loads(text)
            self.chain_row(site, "config", row, now)

    def profile_version(self, site: str) -> str:
        """The short SHA-256 of the profile the site runs under ("" before any config record)."""
        text = self.meta(f"config:{site}")
        return str(json.loads(text)["profile_sha256"])[:12] if text else ""

    # ------------------------------------------------------------------ reads

    def last_calibration(self, site: str, sensor: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM calibration WHERE site=? AND sensor=? ORDER BY ts_us DESC LIMIT 1", (site, sensor)
        ).fetchone()
        return row

    def sound_between(self, site: str, start: datetime, end: datetime) -> list[SoundLevels]:
        rows = self.conn.execute(
            "SELECT * FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
            (site, to_us(start), to_us(end)),
        )
        return [
            SoundLevels(
                site,
                r["sensor"],
                from_us(r["ts_us"]),
                r["duration_s"],
                r["LAeq"],
                r["LAFmax"],
                r["LCpeak"],
                r["LASmax"],
                r["LZpeak"],
                r["LAFmin"],
                r["LCeq"],
                r["LZeq"],
                bool(r["overload"]),
            )
            for r in rows
        ]

    def readings_between(self, site: str, kind: str, start: datetime, end: datetime) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT * FROM readings WHERE site = ? AND kind = ? AND ts_us >= ? AND ts_us < ?"
                " ORDER BY ts_us",
                (site, kind, to_us(start), to_us(end)),
            )
        )

    def events_since(self, site: str, since: datetime) -> list[Event]:
        rows = self.conn.execute(
            "SELECT kind, data FROM events WHERE site = ? AND COALESCE(end_us, ts_us) >= ? ORDER BY ts_us",
            (site, to_us(since)),
        )
        return [event_from_row(r["kind"], r["data"], site) for r in rows]

    def progress(self, site: str) -> tuple[datetime, datetime] | None:
        return queries.progress(self.conn, site)

    def set_progress(self, site: str, evaluated_until: datetime, final_until: datetime) -> None:
        self.conn.execute(
            "INSERT INTO progress (site, evaluated_until_us, final_until_us) VALUES (?,?,?)"
            " ON CONFLICT(site) DO UPDATE SET evaluated_until_us=excluded.evaluated_until_us,"
            " final_until_us=excluded.final_until_us",
            (site, to_us(evaluated_until), to_us(final_until)),
        )

    def keep_sound_hours(self, site: str, until_hour: int) -> int:
        """Count the site's seconds of the hours before ``until_hour`` (numbered from the epoch)
        not counted yet into sound_hours; returns the hour the site's kept histograms now reach
        (migrations.SOUND_HOURS_KEPT: the triggers count the seconds stored in those hours
        later). Call in a write transaction. An hour still receiving seconds may be kept: its
        later seconds are counted one by one, by the triggers."""
        kept = queries.sound_hours_until(self.conn, site)
        if kept is not None and until_hour <= kept:
            return kept
        # The hours from the site's until_hour on are not in sound_hours (neither counted here
        # nor by the triggers). One GROUP BY an hour that has seconds, found by an index seek:
        # its sort holds one hour of the site's seconds at most, and empty days cost nothing.
        end_us = until_hour * queries.HOUR_US
        from_us = -(2**63) if kept is None else kept * queries.HOUR_US  # nothing kept: every second
        while True:
            first = self.conn.execute(
                "SELECT MIN(ts_us) FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ?",
                (site, from_us, end_us),
            ).fetchone()[0]
            if first is None:
                break
            hour_us = first // queries.HOUR_US * queries.HOUR_US
            from_us = hour_us + queries.HOUR_US
            self.conn.execute(
                "INSERT INTO sound_hours SELECT site, ts_us / 3600000000, sensor,"
                " CAST(round(LAeq * 10) AS INTEGER) AS bin, COUNT(*), SUM(power(10, LAeq / 10.0))"
                " FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY sensor, bin",
                (site, hour_us, from_us),
            )
        self.conn.execute("INSERT OR REPLACE INTO sound_hours_kept VALUES (?, ?)", (site, until_hour))
        return until_hour

    def record_judged(self, site: str, start: datetime, end: datetime) -> None:
        """The site's minutes in [start, end) have had their final judgement: extend the judged
        window ending at ``start`` (the final front only moves on), or open a new one."""
        start_us, end_us = to_us(start), to_us(end)
        if end_us <= start_us:
            return
        extended = self.conn.execute(
            "UPDATE judged SET end_us = MAX(end_us, ?) WHERE site = ? AND start_us <= ? AND end_us >= ?",
            (end_us, site, start_us, start_us),
        ).rowcount
        if not extended:
            self.conn.execute(
                "INSERT INTO judged (site, start_us, end_us) VALUES (?,?,?)"
                " ON CONFLICT(site, start_us) DO UPDATE SET end_us = MAX(end_us, excluded.end_us)",
                (site, start_us, end_us),
            )

    def newest_data_end(
        self, site: str, sensors: Iterable[str], stamped_by: datetime | None = None
    ) -> datetime | None:
        """End of the newest sound, light, weather or turbidity reading stored for the site
        (``stamped_by``: of those stamped at or before it).

        Where the site's data had got to when the daemon stopped: its minute closing and the
        data clock continue from here after a restart. Every lookup is a seek on a key.
        """
        by = _NO_LIMIT_US if stamped_by is None else to_us(stamped_by)
        ends: list[int] = []
        row = self.conn.execute(
            "SELECT ts_us, MAX(duration_s) FROM sound WHERE site = ?"
            " AND ts_us = (SELECT MAX(ts_us) FROM sound WHERE site = ? AND ts_us <= ?)",
            (site, site, by),
        ).fetchone()
        if row is not None and row[0] is not None:
            ends.append(row[0] + round(row[1] * 1e6))
        for sensor in sensors:
            for kind in ("light", "weather", "turbidity"):
                found = self.conn.execute(
                    "SELECT ts_us, duration_s FROM readings WHERE site = ? AND sensor = ? AND kind = ?"
                    " AND ts_us <= ? ORDER BY ts_us DESC LIMIT 1",
                    (site, sensor, kind, by),
                ).fetchone()
                if found is not None:
                    ends.append(found[0] + round(found[1] * 1e6))
        return from_us(max(ends)) if ends else None

    def first_data_start(self, site: str) -> datetime | None:
        """Start of the oldest reading stored for the site that its judging starts from (sound,
        light, weather, turbidity, a seismograph's summary; not a status heartbeat).

        A site's judging starts at the minute of its first reading; a daemon restarted before it
        recorded any progress starts there, not at the first reading it takes in itself.
        """
        starts = [self.conn.execute("SELECT MIN(ts_us) FROM sound WHERE site = ?", (site,)).fetchone()[0]]
        for kind in JUDGED_READING_KINDS:  # each a seek on readings_by_kind
            starts.append(
                self.conn.execute(
                    "SELECT MIN(ts_us) FROM readings WHERE site = ? AND kind = ?", (site, kind)
                ).fetchone()[0]
            )
        known = [s for s in starts if s is not None]
        return from_us(min(known)) if known else None

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def prune(self, before: datetime, blast_records_before: datetime | None = None) -> int:
        """Drop per-second data older than ``before``; findings, events, notices and the chain stay.

        Blast records (seismograph summaries and waveforms) go only before
        ``blast_records_before`` (SPS 307.31(4): kept at least 3 years), and never when it is
        None. Pruned rows are then outside what a bundle can prove from the store (the
        chain keeps their digests, so the gap itself is visible).
        """
        cut = to_us(before)
        with self.batch():
            removed = self.conn.execute("DELETE FROM sound WHERE ts_us < ?", (cut,)).rowcount
            removed += self.conn.execute(
                "DELETE FROM readings WHERE ts_us < ? AND kind NOT IN ('seismic', 'seismic-waveforms')",
                (cut,),
            ).rowcount
            if blast_records_before is not None:
                blast_cut = min(cut, to_us(blast_records_before))
                removed += self.conn.execute(
                    "DELETE FROM readings WHERE ts_us < ? AND kind IN ('seismic', 'seismic-waveforms')",
                    (blast_cut,),
                ).rowcount
                removed += self.conn.execute("DELETE FROM waveforms WHERE ts_us < ?", (blast_cut,)).rowcount
            removed += self.conn.execute("DELETE FROM audio WHERE ts_us < ?", (cut,)).rowcount
            self.set_meta("pruned_before_us", str(cut))
        return removed

    # ===================================================================== daemon queries
    # What the pipeline and `minewatch status` ask of the store beyond appending records:
    # typed readings for the rules, the finding a retraction repeats, anchors, the status.

    def light_between(self, site: str, start: datetime, end: datetime) -> list[LightSummary]:
        rows = self.readings_between(site, "light", start, end)
        return [r for r in map(reading_from_row, rows) if isinstance(r, LightSummary)]

    def weather_between(self, site: str, start: datetime, end: datetime) -> list[WeatherReading]:
        rows = self.readings_between(site, "weather", start, end)
        return [r for r in map(reading_from_row, rows) if isinstance(r, WeatherReading)]

    def turbidity_between(self, site: str, start: datetime, end: datetime) -> list[TurbidityReading]:
        rows = self.readings_between(site, "turbidity", start, end)
        return [r for r in map(reading_from_row, rows) if isinstance(r, TurbidityReading)]

    def latest_finding(self, finding_id: str) -> Finding | None:
        """The newest revision of a finding (retracted or not), None if it was never stored."""
        row = self.conn.execute(
            "SELECT data FROM findings WHERE id = ? ORDER BY revision DESC LIMIT 1", (finding_id,)
        ).fetchone()
        return None if row is None else finding_from_json(json.loads(row["data"]))

    def record_anchor(self, site: str, seq: int, head: str, now: datetime) -> None:
        """Note that the chain head at ``seq`` was published (once per record: a republish is ignored)."""
        self.conn.execute(
            "INSERT OR IGNORE INTO anchors (site, seq, head, published_us) VALUES (?,?,?,?)",
            (site, seq, head, to_us(now)),
        )

    def last_data_us(self, site: str, sensor: str, through: datetime | None = None) -> int | None:
        """Microseconds of the newest sound second or reading of a sensor (starting at or before
        ``through``, when given), None if it never sent any."""
        last = to_us(through) if through is not None else _NO_LIMIT_US
        sound = self.conn.execute(_LAST_SOUND, (site, sensor, last)).fetchone()
        reading = self.conn.execute(
            _LAST_READING, {"site": site, "sensor": sensor, "through": last}
        ).fetchone()
        found = [row[0] for row in (sound, reading) if row is not None and row[0] is not None]
        return max(found) if found else None

    def sound_laeq_between(self, site: str, start: datetime, end: datetime) -> list[tuple[str, float, float]]:
        """(sensor, LAeq, duration_s) of every sound period of the site starting in [start, end)."""
        rows = self.conn.execute(
            "SELECT sensor, LAeq, duration_s FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ?",
            (site, to_us(start), to_us(end)),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def overloaded_s_between(self, site: str, start: datetime, end: datetime) -> dict[str, float]:
        """Per sensor, the seconds of its sound periods starting in [start, end) that were measured
        overloaded (none: not listed); read from the index of such rows alone."""
        return queries.overloaded_seconds(self.conn, site, to_us(start), to_us(end))


# Newest sound second of one sensor. The sound key is (site, ts_us, sensor): walking it
# backwards from the newest second stops at the sensor's last one, where MAX() over a
# UNION with readings read every row of the site.
_LAST_SOUND = (
    "SELECT ts_us FROM sound WHERE site = ? AND sensor = ? AND ts_us <= ? ORDER BY ts_us DESC LIMIT 1"
)
_NO_LIMIT_US = 2**62
# Newest reading of one sensor. The readings key is (site, sensor, kind, ts_us): one index
# seek per kind (a skip scan over the kinds the sensor has), not a scan of its readings.
_LAST_READING = """
WITH RECURSIVE kinds(kind) AS (
    SELECT MIN(kind) FROM readings WHERE site = :site AND sensor = :sensor
    UNION ALL
    SELECT (SELECT MIN(kind) FROM readings WHERE site = :site AND sensor = :sensor AND kind > kinds.kind)
    FROM kinds WHERE kinds.kind IS NOT NULL
)
SELECT MAX((
    SELECT MAX(ts_us) FROM readings
    WHERE site = :site AND sensor = :sensor AND kind = kinds.kind AND ts_us <= :through
))
FROM kinds WHERE kinds.kind IS NOT NULL
"""
