"""A benchmark's scratch folder: made for the run and removed after it, unless kept.

The benches that start a broker and a daemon fill a folder of their own (a 2,000-per-sensor
ingest run leaves 500 MB of store and broker files); left behind run after run, they filled
/tmp. A run that fails keeps its folder and says where, for its logs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_folder(prefix: str, keep: bool, under: Path | None = None) -> Iterator[Path]:
    """A new folder under ``under`` or the system's temporary one; removed on success unless ``keep``."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    try:
        yield folder
    except BaseException:
        print(f"{folder}: kept (the run failed; its logs are there)", file=sys.stderr)
        raise
    if keep:
        print(f"{folder}: kept (--keep)", file=sys.stderr)
    else:
        shutil.rmtree(folder, ignore_errors=True)


KEEP_HELP = "keep the run's scratch folder (store, logs, broker files); it is removed after a successful run"
