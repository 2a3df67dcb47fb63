"""minewatch's own error tree; foreign exceptions are translated where they are raised.

MinewatchError
 ├── ConfigError     bad configuration; .problems lists every "path.to.key: reason"
 ├── DecodeError     a message that cannot be accepted; .field and .reason
 ├── StoreError      the local SQLite journal failed
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


class OutputError(MinewatchError):
    def __init__(self, message: str, *, retryable: bool) -> None:
        self.retryable = retryable
        super().__init__(message)


class UsageError(MinewatchError):
    """A user's mistake on the command line; ``monitor.cli.main`` prints it as one line, exit 2."""
