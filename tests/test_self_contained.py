"""The repository carries everything it reads: a clone with nothing beside it must pass.

The project keeps reference material in a folder beside the checkout (``shared/``); tests
copy what they need into tests/data/ instead (sources named in tests/data/README.md).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A path component "shared" in a string literal: the folder itself, a path under it, or the
# same with leading parent steps (the reference folder that sits beside a developer's checkout).
SHARED_PATH = re.compile(r"""["'](?:\.\./)*shared(?:/[^"']*)?["']""")


def test_no_code_reads_the_folder_beside_the_checkout() -> None:
    offenders = []
    for folder in ("monitor", "rules", "sensors", "tests", "bench", "deploy"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".py", ".sh", "") or not path.is_file() or path == Path(__file__):
                continue
            text = path.read_text(errors="replace")
            if SHARED_PATH.search(text) or "/work/shared" in text:
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_reference_table_is_in_the_repository() -> None:
    table = REPO / "tests" / "data" / "iec61672_table3.csv"
    assert table.read_text().startswith("freq_hz,A_db,C_db,")
    assert "IEC 61672-1:2013" in (REPO / "tests" / "data" / "README.md").read_text()
