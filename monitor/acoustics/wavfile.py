"""Minimal WAV reader: first channel, 8/16/24/32-bit integer and 32/64-bit float PCM.

Parsed by hand rather than with scipy.io.wavfile, whose 24-bit and WAVE_FORMAT_EXTENSIBLE
support differs between versions.  Any malformed file raises ``ValueError`` with a one-line
message naming the problem.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.named_file import read_named_bytes

WAVE_FORMAT_PCM = 0x0001
WAVE_FORMAT_IEEE_FLOAT = 0x0003
WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# Sizes written by recorders that never went back to fill them in.
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)


@dataclass(frozen=True)
class WavAudio:
    """First channel of a WAV file as float64, full scale = 1.0."""

    samples: NDArray[np.float64]
    sample_rate: int
    channels: int
    bits_per_sample: int
    is_float: bool


def read_wav(path: str | Path) -> WavAudio:
    """Read ``path``; raise ValueError naming it and the problem if it is not a usable WAV file."""
    # A pipe is a source (a recorder writing into it); NamedFileError, a ValueError, names the path.
    data = read_named_bytes(path, "WAV file", pipe_ok=True)
    try:
        return parse_wav(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def parse_wav(data: bytes) -> WavAudio:
    """Parse the bytes of a RIFF/WAVE file (see :func:`read_wav`)."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    fmt: bytes | None = None
    samples_view: memoryview | None = None
    position = 12
    view = memoryview(data)
    while position + 8 <= len(data):
        chunk_id = data[position : position + 4]
        (size,) = struct.unpack_from("<I", data, position + 4)
        body_start = position + 8
        if chunk_id == b"data":
            available = len(data) - body_start
            if size in _UNKNOWN_SIZES:
                size = available
            elif size > available:
                raise ValueError(f"truncated data chunk ({available} of {size} bytes present)")
            samples_view = view[body_start : body_start + size]
            if fmt is not None:
                break
        elif chunk_id == b"fmt ":
            if body_start + size > len(data):
                raise ValueError("truncated fmt chunk")
            fmt = data[body_start : body_start + size]
        position = body_start + size + (size & 1)  # chunks are word aligned
    if fmt is None:
        raise ValueError("no fmt chunk")
    if samples_view is None:
        raise ValueError("no data chunk")
    return _decode(fmt, samples_view)


def _decode(fmt: bytes, payload: memoryview) -> WavAudio:
    if len(fmt) < 16:
        raise ValueError(f"fmt chunk too short ({len(fmt)} bytes)")
    format_tag, channels, sample_rate, _, block_align, bits = struct.unpack_from("<HHIIHH", fmt)
    if format_tag == WAVE_FORMAT_EXTENSIBLE:
        if len(fmt) < 40:
            raise ValueError("WAVE_FORMAT_EXTENSIBLE fmt chunk too short")
        (valid_bits,) = struct.unpack_from("<H", fmt, 18)
        (format_tag,) = struct.unpack_from("<H", fmt, 24)  # first two bytes of the SubFormat GUID
        del valid_bits  # container size decides decoding; low padding bits are zero
    if channels < 1:
        raise ValueError("zero channels")
    if sample_rate < 1:
        raise ValueError("zero sample rate")
    bytes_per_sample = bits // 8
    if bits % 8 or block_align != channels * bytes_per_sample:
        raise ValueError(f"inconsistent block alignment ({block_align} for {channels} x {bits} bits)")

    is_float = format_tag == WAVE_FORMAT_IEEE_FLOAT
    if format_tag == WAVE_FORMAT_PCM:
        if bits not in (8, 16, 24, 32):
            raise ValueError(f"unsupported integer sample size {bits} bits")
    elif is_float:
        if bits not in (32, 64):
            raise ValueError(f"unsupported float sample size {bits} bits")
    else:
        raise ValueError(f"unsupported WAV format tag 0x{format_tag:04x}")

    frames = len(payload) // block_align
    if frames == 0:
        raise ValueError("data chunk holds no samples")
    raw = np.frombuffer(payload, dtype=np.uint8, count=frames * block_align).reshape(frames, block_align)
    first = raw[:, :bytes_per_sample]  # first channel only
    samples = _to_float(np.ascontiguousarray(first), bits, is_float)
    if not np.all(np.isfinite(samples)):
        raise ValueError("data contains non-finite float samples")
    return WavAudio(samples, int(sample_rate), int(channels), int(bits), is_float)


def _to_float(first: NDArray[np.uint8], bits: int, is_float: bool) -> NDArray[np.float64]:
    if is_float:
        dtype = "<f4" if bits == 32 else "<f8"
        return first.view(dtype).ravel().astype(np.float64)
    if bits == 8:  # unsigned, offset binary
        return (first.ravel().astype(np.float64) - 128.0) / 128.0
    if bits == 24:
        # Place the three little-endian bytes in the top of an int32 so the sign comes for free.
        widened = np.zeros((first.shape[0], 4), dtype=np.uint8)
        widened[:, 1:] = first
        return widened.view("<i4").ravel().astype(np.float64) / 2.0**31
    dtype = "<i2" if bits == 16 else "<i4"
    return first.view(dtype).ravel().astype(np.float64) / 2.0 ** (bits - 1)


def wav_bytes(pcm: bytes, sample_rate: int, bits: int, is_float: bool) -> bytes:
    """A mono RIFF/WAVE file holding ``pcm`` as given (little-endian samples, byte for byte):
    integer PCM (format 1) or IEEE float (format 3), the inverse of :func:`parse_wav`."""
    width = bits // 8
    tag = WAVE_FORMAT_IEEE_FLOAT if is_float else WAVE_FORMAT_PCM
    fmt = struct.pack("<HHIIHH", tag, 1, sample_rate, sample_rate * width, width, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(pcm)) + pcm
    if len(pcm) & 1:
        body += b"\0"  # chunks are word aligned
    return b"RIFF" + struct.pack("<I", len(body)) + body
