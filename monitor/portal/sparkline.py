"""A small inline SVG trend of one meter's per-minute LAeq (the operator's live status)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

WIDTH, HEIGHT = 180, 36  # px: fits a table cell, also at 390 px wide


def sparkline(minutes: Mapping[int, float], first: int, last: int, limit_db: float | None = None) -> str:
    """``minutes`` (minute number since the epoch -> LAeq) drawn over [first, last] minutes; a gap
    in the data is a gap in the line; ``limit_db`` a dashed line when it falls in the range.
    "" without any minute."""
    if not minutes or last <= first:
        return ""
    values = list(minutes.values()) + ([limit_db] if limit_db is not None else [])
    low, high = min(values) - 1.0, max(values) + 1.0
    span_x, span_y = last - first, high - low

    def x(m: int) -> float:
        return round((m - first) / span_x * (WIDTH - 2) + 1, 1)

    def y(v: float) -> float:
        return round(HEIGHT - 1 - (v - low) / span_y * (HEIGHT - 2), 1)

    runs: list[list[str]] = []
    previous = None
    for m in sorted(minutes):
        if previous is None or m != previous + 1:
            runs.append([])
        runs[-1].append(f"{x(m)},{y(minutes[m])}")
        previous = m
    label = f"LAeq per minute, {min(minutes.values()):.1f} to {max(minutes.values()):.1f} dB(A)"
    parts = [
        f'<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' role="img" aria-label="{escape(label)}">'
    ]
    if limit_db is not None:
        parts.append(
            f'<line class="limit" x1="0" x2="{WIDTH}" y1="{y(limit_db)}" y2="{y(limit_db)}"'
            ' stroke="#b3261e" stroke-dasharray="3 2" stroke-width="1"/>'
        )
    for run in runs:
        if len(run) == 1:
            cx, cy = run[0].split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="1.2" fill="#1f5f8b"/>')
        else:
            points = " ".join(run)
            parts.append(f'<polyline points="{points}" fill="none" stroke="#1f5f8b" stroke-width="1.2"/>')
    parts.append("</svg>")
    return "".join(parts)
