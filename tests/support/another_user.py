"""A file this user may not read or write, for real: the tests run as root, which may read and
write any file, so the file is made another user's and the command run without those powers."""

from __future__ import annotations

import os
from pathlib import Path


def refused_to_this_user(path: Path, mode: int) -> list[str]:
    """``path`` given ``mode`` as another user's file (nobody's) where the tests run as root,
    and the prefix that runs a command as root without the capabilities that let it read or
    write any file (setpriv), or take one over (SQLite, as root, gives a -wal or -shm it opens
    to the store's owner). Run as another user, ``path`` stays this user's, its owner's bits
    made its group's (0600 none, 0644 read-only), and no prefix is needed."""
    if os.geteuid() != 0:
        path.chmod(mode & 0o077 | (mode & 0o070) << 3)
        return []
    os.chown(path, 65534, 65534)
    path.chmod(mode)
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-chown,-fowner"]
