"""Opening a file a person named: a configuration, a profile, a scenario, a password, an
anchors file, a recording or a bundle.

Every way it can fail is one sentence naming the path (``NamedFileError``), for the caller to
put in its own error: a missing file, a folder, a device or pipe (which would never end, or
block until a writer came), a text file of more than ``MAX_TEXT_BYTES`` (a log or an image
named by mistake) or of bytes that are not UTF-8 (a random binary password). A recording may
come through a pipe (``pipe_ok``): it is read to its end as a file is.

Standard library only: the bundle verifier a town runs, and ``rules.profile``, import it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

# The largest of the text files is a configuration of many sites: tens of kilobytes.
MAX_TEXT_BYTES = 16 * 1024 * 1024


class NamedFileError(ValueError):
    """Why a named file cannot be read; the message starts with its path."""


def open_named_file(path: str | Path, what: str, *, pipe_ok: bool = False) -> BinaryIO:
    """The regular file at ``path`` (or, with ``pipe_ok``, a FIFO), open for reading; ``what`` it
    should be names it in a refusal."""
    try:
        if pipe_ok and stat.S_ISFIFO(os.stat(path).st_mode):
            # Opened once, blocking: the open waits for a writer (a read before one came would be
            # the end at once), and reading ends at the writer's end. Not after a non-blocking
            # look: a writer that came while that reader was open would write into a pipe its
            # reader then left, and the blocking open would wait for a writer that never came.
            return open(path, "rb")
        # Non-blocking, so that a FIFO is refused below instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise NamedFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise NamedFileError(f"{path}: cannot read: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise NamedFileError(f"{path}: is {kind}, not {_a(what)}")
    return open(fd, "rb")


def read_named_bytes(path: str | Path, what: str, *, pipe_ok: bool = False) -> bytes:
    """The whole content of the regular file at ``path`` (or of a FIFO, with ``pipe_ok``)."""
    with open_named_file(path, what, pipe_ok=pipe_ok) as file:
        try:
            return file.read()
        except OSError as exc:
            raise NamedFileError(f"{path}: cannot read: {exc.strerror}") from None


def read_named_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of the regular file at ``path``, at most MAX_TEXT_BYTES of it."""
    with open_named_file(path, what) as file:
        try:
            data = file.read(MAX_TEXT_BYTES + 1)
        except OSError as exc:
            raise NamedFileError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_TEXT_BYTES:
        raise NamedFileError(f"{path}: larger than {MAX_TEXT_BYTES // 2**20} MiB, not {_a(what)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NamedFileError(f"{path}: cannot read: not UTF-8 text") from None


def _a(what: str) -> str:
    """``what`` with its article: "a WAV file", "an anchors file" (it said "a anchors file")."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"
