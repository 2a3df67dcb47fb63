"""Verify refuses a zip bomb by a problem line, not by running out of memory (issue 24).

A 1 MB upload whose manifest.json inflated to 1 GiB took the portal from 89 MB to 2.1 GB; a
1 GiB README.txt behind a valid manifest to 1.5 GB. The bundles here are real zips crafted so;
each is verified in a fresh process whose peak RSS is measured against its RSS before.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.monitor.evidence.test_bundles import Site, build_site, export
from tests.support.paths import REPO

MiB = 1 << 20
INFLATED = 256 * MiB  # what each bomb inflates to: far beyond the 50 MB the test allows

# Verify in a process of its own: RSS after the imports, then its peak while verifying (VmHWM, the
# process's own high-water mark: ru_maxrss would carry the parent's over the fork).
_MEASURE = """
import json, re, sys
from pathlib import Path
import psutil
from monitor.evidence import verify_bundle
before = psutil.Process().memory_info().rss
Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts from here
report = verify_bundle(sys.argv[1], workers=1)
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
print(json.dumps({"before": before, "peak": peak, "lines": report.lines()}))
"""


def _verify_measured(bundle: Path) -> tuple[int, list[str]]:
    """(peak RSS growth in bytes, the report's lines) of verifying ``bundle`` in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(bundle)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=240,
    ).stdout
    result = json.loads(out)
    return int(result["peak"]) - int(result["before"]), list(result["lines"])


def _spaces(count: int) -> Iterator[bytes]:
    spaces = b" " * MiB
    for _ in range(count // MiB):
        yield spaces
    yield spaces[: count % MiB]


def _write_bomb(src: Path, dst: Path, name: str, head: bytes, *, manifest: bytes | None = None) -> Path:
    """``src`` with member ``name`` replaced by ``head`` and spaces up to INFLATED bytes (deflated
    about 1000 to 1); ``manifest`` replaces manifest.json when given."""
    with zipfile.ZipFile(src) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    if manifest is not None:
        members["manifest.json"] = manifest
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for member, data in members.items():
            if member != name:
                zout.writestr(member, data)
        with zout.open(name, "w", force_zip64=True) as bomb:
            bomb.write(head)
            for chunk in _spaces(INFLATED - len(head)):
                bomb.write(chunk)
    assert dst.stat().st_size < 2 * MiB
    return dst


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("limits")
    site: Site = build_site(tmp, seconds=60)
    return export(site, tmp / "b.zip")


def test_an_honest_bundle_verifies_within_the_limits(bundle: Path) -> None:
    grown, lines = _verify_measured(bundle)
    assert "FAILED" not in lines[0], lines
    assert grown < 50 * MiB


def test_a_manifest_inflating_to_hundreds_of_megabytes_is_refused_in_bounded_memory(
    bundle: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(bundle) as zf:
        manifest = zf.read("manifest.json")
    bomb = _write_bomb(bundle, tmp_path / "manifest-bomb.zip", "manifest.json", manifest)
    grown, lines = _verify_measured(bomb)
    assert lines == [
        f"{bomb}: FAILED: refused: manifest.json inflates to {INFLATED:,} bytes, more than 16,777,216:"
        " beyond the limits of a bundle (docs/EVIDENCE.md)"
    ]
    assert grown < 50 * MiB, f"verify grew by {grown / MiB:.0f} MB"


def test_a_readme_bomb_behind_a_valid_manifest_is_refused_in_bounded_memory(
    bundle: Path, tmp_path: Path
) -> None:
    bomb = _write_bomb(bundle, tmp_path / "readme-bomb.zip", "README.txt", b"minewatch evidence bundle\n")
    grown, lines = _verify_measured(bomb)
    assert lines[0].startswith(f"{bomb}: FAILED: refused: README.txt inflates to {INFLATED:,} bytes"), lines
    assert grown < 50 * MiB, f"verify grew by {grown / MiB:.0f} MB"


def test_a_member_the_manifest_declares_that_large_is_refused_by_its_ratio(
    bundle: Path, tmp_path: Path
) -> None:
    """A forger who also lists the bomb in the manifest (its true size and SHA-256) gets no further:
    no evidence member inflates 200 times its compressed size."""
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    head = b"seq,kind,key,digest,recorded_us\n"
    sha = hashlib.sha256(head)
    for chunk in _spaces(INFLATED - len(head)):
        sha.update(chunk)
    for entry in manifest["files"]:
        if entry["name"] == "chain.csv":
            entry.update(sha256=sha.hexdigest(), bytes=INFLATED)
    bomb = _write_bomb(
        bundle, tmp_path / "chain-bomb.zip", "chain.csv", head, manifest=json.dumps(manifest).encode()
    )
    grown, lines = _verify_measured(bomb)
    assert lines[0].startswith(f"{bomb}: FAILED: refused: chain.csv inflates "), lines
    assert "times its compressed size" in lines[0] and "more than 200 times" in lines[0]
    assert grown < 50 * MiB, f"verify grew by {grown / MiB:.0f} MB"


def _forged_directory(dst: Path, entries: int, stated: int) -> Path:
    """A zip of one empty member listed ``entries`` times in its central directory, under an end
    record that states ``stated`` members (zipfile reads the directory by its size)."""
    name = b"a"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
    central = (
        struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0, 0, 0, 0)
        + name
    )
    directory = central * entries
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, stated, stated, len(directory), len(local), 0)
    dst.write_bytes(local + directory + end)
    return dst


def test_a_directory_of_more_members_than_its_end_record_states_is_refused_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """300,000 entries stated as 1: counted before zipfile lists them (a portal verifying 2,000,000
    such entries grew from 258 MB to 1.15 GB, and 9,800,000 to 4.5 GB)."""
    bomb = _forged_directory(tmp_path / "forged.zip", 300_000, stated=1)
    with zipfile.ZipFile(bomb) as zf:  # a zip zipfile reads, every entry listed
        assert len(zf.infolist()) == 300_000
    grown, lines = _verify_measured(bomb)
    assert lines[0] == f"{bomb}: FAILED: refused: the zip holds more than 100,000 members", lines
    assert grown < 50 * MiB, f"verify grew by {grown / MiB:.0f} MB"


def test_a_directory_beyond_its_cap_is_refused_unread(tmp_path: Path) -> None:
    bomb = tmp_path / "stated.zip"
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, 40 * MiB, 0, 0)
    bomb.write_bytes(end)
    _, lines = _verify_measured(bomb)
    assert lines[0] == (
        f"{bomb}: FAILED: refused: the zip's list of members takes 41,943,040 bytes, more than 33,554,432"
    ), lines
