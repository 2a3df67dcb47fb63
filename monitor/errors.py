"""minewatch's own error tree; foreign exceptions are translated where they are raised.

MinewatchError
 ├── ConfigError     bad configuration; .problems lists every "path.to.key: reason"
 ├── DecodeError     a message that cannot be accepted; .field and .reason
 ├── StoreError      the local SQLite journal failed
 │    └── StoreUnwritable  its disk or file refuses writes for now (full, I/O error, read-only)
 ├── OutputError     a downstream write failed; .retryable says whether to try again
 └── UsageError      a mistake on the command line: one line (what is wrong, what to do), exit 2
"""

from __future__ import annotations


class MinewatchError(Exception):
    """Base of every error minewatch raises on purpose."""


class ConfigError(MinewatchError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class DecodeError(MinewatchError):
    """A message was rejected. ``field`` names the part at fault ("" for the whole message)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class StoreError(MinewatchError):
    pass


class StoreUnwritable(StoreError):
    """The store's disk or file refuses writes (full, an I/O error, read-only, locked too long).

    No message or record is at fault, and the same work may succeed later: the daemon holds
    what it has not stored and tries again (``monitor.daemon.store_outage``). ``stored``: how
    many messages of the batch in hand were committed before the failure. ``code``: SQLite's
    primary result code (sqlite3.SQLITE_FULL ...), which the advice in the log follows
    (``monitor.journal.store.what_to_do``).
    """

    def __init__(self, path: str, reason: str, stored: int = 0, *, code: int) -> None:
        self.path = path
        self.reason = reason
        self.stored = stored
        self.code = code
        super().__init__(f"cannot write the store {path}: {reason}")


class OutputError(MinewatchError):
    def __init__(self, message: str, *, retryable: bool) -> None:
        self.retryable = retryable
        super().__init__(message)


class UsageError(MinewatchError):
    """A user's mistake on the command line; ``monitor.cli.main`` prints it as one line, exit 2."""
