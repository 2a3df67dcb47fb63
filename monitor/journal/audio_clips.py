"""Clips of the raw audio blocks the store holds, each block's chain digest checked first.

An audio sensor sends blocks of PCM (monitor/wire/codec.py: s16le, s32le or f32le, mono, a
sample rate and a start time each); the store keeps them in ``audio`` and chains each one's
record, which holds the SHA-256 of its samples (chain_kinds.audio_record). A clip of
[start, end) is the samples of the sensor's blocks whose times fall in it, in time order,
byte for byte as stored, with silence where no block was received, so that a moment in the
clip is that moment's time since the clip's start; it stops at the first block of another
rate or format and after ``max_s`` seconds. Before a block is used its record is hashed again
and compared with its chain entry: a block altered in the store after it was chained (or
never chained) is refused, never served.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from monitor.errors import MinewatchError
from monitor.journal import queries
from monitor.journal.chain_kinds import KINDS, digest_of
from monitor.wire.canonical import from_us
from monitor.wire.protocol import AUDIO_FORMATS, format_ts

MAX_CLIP_S = 120.0  # a clip is for listening: two minutes tell a haul truck from a crusher
LOOKBACK_US = 60_000_000  # a block starting this long before a span may still reach into it


class ClipRefused(MinewatchError):
    """A block of the clip does not match its chain entry: the clip is not served."""


@dataclass(frozen=True, slots=True)
class Block:
    ts_us: int
    sample_rate: int
    sample_format: str
    pcm: bytes

    @property
    def width(self) -> int:
        return AUDIO_FORMATS[self.sample_format][1]

    @property
    def end_us(self) -> int:
        return self.ts_us + (len(self.pcm) // self.width) * 1_000_000 // self.sample_rate


@dataclass(frozen=True, slots=True)
class Clip:
    sample_rate: int
    sample_format: str
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / AUDIO_FORMATS[self.sample_format][1] / self.sample_rate


def checked_blocks(
    conn: sqlite3.Connection, site: str, sensor: str, start_us: int, end_us: int
) -> list[Block]:
    """The sensor's blocks that may reach into [start_us, end_us), in time order, each one's
    record hashed and compared with its chain entry; ClipRefused names the first that differs."""
    blocks = []
    kind = KINDS["audio"]
    for found in queries.audio_blocks(conn, site, sensor, start_us - LOOKBACK_US, end_us):
        row = dict(found)
        entry = queries.chain_entry(conn, site, "audio", kind.key_of(row))
        when = format_ts(from_us(row["ts_us"]))
        if entry is None:
            raise ClipRefused(f"the audio block of {sensor} at {when} has no chain entry: not served")
        if digest_of(kind.record(row)) != entry.digest:
            raise ClipRefused(
                f"the audio block of {sensor} at {when} does not match its chain digest (chain entry"
                f" {entry.seq}): it was altered after it was stored; the clip is not served"
            )
        blocks.append(
            Block(int(row["ts_us"]), int(row["sample_rate"]), str(row["format"]), bytes(row["pcm"]))
        )
    return blocks


def cut(blocks: list[Block], start_us: int, end_us: int, max_s: float = MAX_CLIP_S) -> Clip | None:
    """The clip of [start_us, end_us) from ``blocks`` (time order; see the module's text), None
    when no block has a sample in it. Sample i of a block is at ts_us + i / rate."""
    inside = [b for b in blocks if b.end_us > start_us and b.ts_us < end_us]
    if not inside:
        return None
    first = inside[0]
    rate, fmt, width = first.sample_rate, first.sample_format, first.width
    begin = max(start_us, first.ts_us)
    stop = min(end_us, begin + int(max_s * 1_000_000))
    total = (stop - begin) * rate // 1_000_000  # samples in the clip at most
    out = bytearray()
    for b in inside:
        if b.sample_rate != rate or b.sample_format != fmt:
            break
        lo = max(0, -((b.ts_us - begin) * rate // 1_000_000))  # first sample at or after begin
        hi = min(len(b.pcm) // width, -(-(stop - b.ts_us) * rate // 1_000_000))  # first at or after stop
        at = (b.ts_us - begin) * rate // 1_000_000 + lo  # its place in the clip, in samples
        if hi <= lo or at >= total:
            continue
        if at > len(out) // width:  # no block for a while: silence, so times stay true
            out += bytes((at - len(out) // width) * width)
        elif at < len(out) // width:  # overlaps what is there: keep the earlier block's samples
            lo += len(out) // width - at
        out += b.pcm[lo * width : hi * width]
    return Clip(rate, fmt, bytes(out[: total * width])) if out else None
