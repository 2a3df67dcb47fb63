"""A bundle's members are deflated by ISA-L (monitor/evidence/export.py, _deflate_with_isal): the
same zip format, read back by zipfile and zlib, with the CRC and sizes zipfile counts."""

from __future__ import annotations

import hashlib
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from isal import isal_zlib

from monitor.evidence import export
from monitor.evidence.format import COMPRESS_LEVEL

ROWS = "".join(f"{seq},quarry,n{seq % 10:02d},{seq * 1_000_000},{60 + seq / 7!r}\n" for seq in range(40_000))


def write_member(path: Path) -> tuple[list[dict[str, Any]], Any]:
    files: list[dict[str, Any]] = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as zf:
        member = export._Member(zf, "data/rows.csv", files, threaded=True)
        compressor = member._raw._compressor
        for start in range(0, len(ROWS), 65_536):  # as the exporter writes: in pieces
            member.write(ROWS[start : start + 65_536].encode())
        member.close(rows=40_000)
    return files, compressor


def test_a_member_is_deflated_by_isal_and_reads_back_with_its_crc_and_digest(tmp_path: Path) -> None:
    bundle = tmp_path / "b.zip"
    files, compressor = write_member(bundle)
    assert type(compressor) is type(isal_zlib.compressobj())
    with zipfile.ZipFile(bundle) as zf:
        assert zf.testzip() is None  # every member's CRC as zipfile counted it
        info = zf.getinfo("data/rows.csv")
        assert zf.read("data/rows.csv") == ROWS.encode()
    with bundle.open("rb") as f:  # the member's deflate stream, after its local header
        f.seek(info.header_offset)
        header = f.read(30)
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        f.seek(info.header_offset + 30 + name_length + extra_length)
        raw = f.read(info.compress_size)
    assert zlib.decompress(raw, -15) == ROWS.encode()  # plain zlib inflates it
    digest = hashlib.sha256(ROWS.encode()).hexdigest()
    assert files == [{"name": "data/rows.csv", "sha256": digest, "bytes": len(ROWS), "rows": 40_000}]
    # ISA-L's own stream, not zlib's: the same text deflated by zlib at the same level differs.
    by_zlib = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)
    assert raw != by_zlib.compress(ROWS.encode()) + by_zlib.flush()


def test_without_isal_zlib_deflates_the_same_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "_isal", None)
    bundle = tmp_path / "b.zip"
    files, compressor = write_member(bundle)
    assert type(compressor) is type(zlib.compressobj())
    with zipfile.ZipFile(bundle) as zf:
        assert zf.testzip() is None and zf.read("data/rows.csv") == ROWS.encode()
    assert files[0]["sha256"] == hashlib.sha256(ROWS.encode()).hexdigest()
