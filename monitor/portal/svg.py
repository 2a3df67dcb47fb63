"""The day view's plot, as SVG written here (no JavaScript, nothing fetched).

One panel per boundary sound sensor (minute LAeq against the limit) and per light sensor
(lux against its limits); on every panel the exempt periods shaded, the 10:00-15:00 blast
window, each blast and the day's sunset. Elements carry classes (``limit``, ``blast-window``,
``blast``, ``sunset``, ``exempt``, ``episode``) so tests and stylesheets can find them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 960, 190, 56, 16, 24, 34


@functools.lru_cache(maxsize=1 << 16)  # a day's 1,440 minute stamps recur on every panel and render
def _t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class _Panel:
    def __init__(self, day: Mapping[str, Any], top: float, lo: float, hi: float) -> None:
        self.t0, self.t1 = _t(day["from"]), _t(day["to"])
        self.top, self.lo, self.hi = top, lo, hi
        self.tz = day["timezone"]

    def x(self, ts: str) -> float:
        span = self.t1 - self.t0
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max((_t(ts) - self.t0) / span, 0.0), 1.0)

    def y(self, v: float) -> float:
        v = min(max(v, self.lo), self.hi)
        return self.top + PANEL_H * (1 - (v - self.lo) / (self.hi - self.lo))


def _frame(
    p: _Panel, day: Mapping[str, Any], sensor: str, title: str, unit: str, ticks: Sequence[float]
) -> list[str]:
    from zoneinfo import ZoneInfo

    out = [
        f'<text x="{LEFT}" y="{p.top - 6:.1f}" class="title">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{p.top}" width="{WIDTH - LEFT - RIGHT}" height="{PANEL_H}" class="frame"/>',
    ]
    for e in day["exempt"]:
        if sensor not in e["sensors"]:
            continue
        x0, x1 = p.x(e["start"]), p.x(e["end"])
        out.append(
            f'<rect class="exempt" x="{x0:.1f}" y="{p.top}" width="{max(x1 - x0, 1):.1f}" height="{PANEL_H}">'
            f"<title>exempt: {escape(e['why'])}</title></rect>"
        )
    for e in day.get("episodes", ()):
        # The episodes every surface tells (one set of facts): the same span as the list beside.
        if sensor not in e["sensors"]:
            continue
        x0, x1 = p.x(e["start"]), p.x(e["end"])
        out.append(
            f'<rect class="episode" x="{x0:.1f}" y="{p.top}" width="{max(x1 - x0, 2):.1f}" height="{PANEL_H}"'
            f' data-episode="{escape(e["id"])}" data-start="{e["start"]}" data-end="{e["end"]}">'
            f"<title>violation: {escape(e['text'])}</title></rect>"
        )
    w = day["blast_window"]
    x0, x1 = p.x(w["start"]), p.x(w["end"])
    out.append(
        f'<rect class="blast-window" x="{x0:.1f}" y="{p.top}" width="{x1 - x0:.1f}" height="{PANEL_H}"'
        f' data-start="{w["start"]}" data-end="{w["end"]}"><title>blast window</title></rect>'
    )
    for v in ticks:
        y = p.y(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(
        f'<text class="tick" x="12" y="{p.top + PANEL_H / 2:.1f}"'
        f' transform="rotate(-90 12 {p.top + PANEL_H / 2:.1f})" text-anchor="middle">{escape(unit)}</text>'
    )
    zone = ZoneInfo(day["timezone"])
    for hour in range(0, 25, 3):
        ts = datetime.fromtimestamp(p.t0 + hour * 3600, zone)
        x = p.x(ts.isoformat())
        out.append(f'<line class="hour" x1="{x:.1f}" x2="{x:.1f}" y1="{p.top}" y2="{p.top + PANEL_H}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{p.top + PANEL_H + 14}" text-anchor="middle">'
            f"{ts.strftime('%H:%M')}</text>"
        )
    if day["sunset"]:
        x = p.x(day["sunset"])
        out.append(
            f'<line class="sunset" x1="{x:.1f}" x2="{x:.1f}" y1="{p.top}" y2="{p.top + PANEL_H}"'
            f' data-ts="{day["sunset"]}"><title>sunset</title></line>'
        )
        out.append(f'<text class="label sunset-label" x="{x + 3:.1f}" y="{p.top + 12}">sunset</text>')
    for b in day["blasts"]:
        x = p.x(b["ts"])
        out.append(
            f'<line class="blast" x1="{x:.1f}" x2="{x:.1f}" y1="{p.top}" y2="{p.top + PANEL_H}"'
            f' data-ts="{b["ts"]}"><title>blast {escape(str(b["id"]))}</title></line>'
        )
        out.append(f'<text class="label blast-label" x="{x + 3:.1f}" y="{p.top + 24}">blast</text>')
    return out


def _polyline(p: _Panel, points: Sequence[tuple[str, float]], cls: str) -> str:
    """Lines between consecutive minutes; a gap in the data is a gap in the line."""
    parts: list[str] = []
    run: list[str] = []
    last = None
    for ts, v in points:
        t = _t(ts)
        if last is not None and t - last > 90 and run:
            parts.append(" ".join(run))
            run = []
        run.append(f"{p.x(ts):.1f},{p.y(v):.1f}")
        last = t
    if run:
        parts.append(" ".join(run))
    out = []
    for r in parts:
        out.append(f'<polyline class="{cls}" points="{r}"/>')
        if r.count(" ") < 10:  # a few minutes alone: dots, or they would hardly show
            for xy in r.split():
                x, y = xy.split(",")
                out.append(f'<circle class="{cls}-dot" cx="{x}" cy="{y}" r="2"/>')
    return "".join(out)


def day_svg(day: Mapping[str, Any]) -> str:
    return DayPlot().render(day)


class DayPlot:
    """The plot of one day view, re-rendered panel by panel: a panel whose points, position and
    shared marks (window, blasts, exempt periods, sunset, limits) are unchanged since the last
    render is reused as it was. Today's view gains a minute or two of one meter between two
    looks, so only that meter's panel is drawn again. Not shared between threads without a lock."""

    def __init__(self) -> None:
        self._panels: dict[tuple[str, str], tuple[tuple[Any, ...], str]] = {}

    def _panel(self, kind: str, sensor: str, inputs: tuple[Any, ...], draw: Any) -> str:
        old = self._panels.get((kind, sensor))
        if old is not None and old[0] == inputs:
            return old[1]
        text: str = draw()
        self._panels[(kind, sensor)] = (inputs, text)
        return text

    def render(self, day: Mapping[str, Any]) -> str:
        marks = (
            day["from"],
            day["to"],
            day["timezone"],
            repr(day["exempt"]),
            repr(day.get("episodes")),
            repr(day["blast_window"]),
            repr(day["blasts"]),
            day["sunset"],
            day["limit_db"],
            repr(day["light_limits"]),
        )
        panels: list[str] = []
        used: set[tuple[str, str]] = set()
        top = TOP
        for sensor, points in day["sound"].items():
            panels.append(
                self._panel(
                    "sound",
                    sensor,
                    (top, marks, points),
                    functools.partial(_sound_panel, day, sensor, points, top),
                )
            )
            used.add(("sound", sensor))
            top += PANEL_H + TOP + GAP
        for sensor, lpoints in day["light"].items():
            panels.append(
                self._panel(
                    "light",
                    sensor,
                    (top, marks, lpoints),
                    functools.partial(_light_panel, day, sensor, lpoints, top),
                )
            )
            used.add(("light", sensor))
            top += PANEL_H + TOP + GAP
        for gone in set(self._panels) - used:
            del self._panels[gone]
        height = top
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="dayplot" viewBox="0 0 {WIDTH} {height}"'
            f' width="{WIDTH}" height="{height}" role="img" aria-label="levels of {escape(day["date"])}">'
            + "".join(panels)
            + "</svg>"
        )


def _sound_panel(day: Mapping[str, Any], sensor: str, points: Sequence[tuple[str, float]], top: float) -> str:
    limit = float(day["limit_db"])
    values = [v for _, v in points]
    lo = min([30.0, *values])
    hi = max([limit + 20, *values])
    lo, hi = 10 * (lo // 10), 10 * (hi // 10 + 1)
    p = _Panel(day, top, lo, hi)
    out = _frame(
        p,
        day,
        sensor,
        f"{sensor}: LAeq per minute",
        "dB(A)",
        [v for v in range(int(lo), int(hi) + 1, 10)],
    )
    out.append(_polyline(p, points, "level"))
    y = p.y(limit)
    out.append(
        f'<line class="limit" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"'
        f' data-limit-db="{limit:g}"><title>limit {limit:g} dB(A)</title></line>'
        f'<text class="label limit-label" x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end">'
        f"limit {limit:g} dB(A)</text>"
    )
    if not points:
        out.append(f'<text class="empty" x="{WIDTH / 2}" y="{top + PANEL_H / 2}">no readings</text>')
    return "".join(out)


def _light_panel(
    day: Mapping[str, Any], sensor: str, lpoints: Sequence[tuple[str, float, float]], top: float
) -> str:
    limits = day["light_limits"]
    peak = max([v for _, _, v in lpoints] or [0.0])
    hi = max([peak * 1.1, *(v * 1.3 for v in limits.values()), 1.0])
    p = _Panel(day, top, 0.0, hi)
    step = _nice_step(hi)
    out = _frame(p, day, sensor, f"{sensor}: light (mean, max)", "lux", _range(0.0, hi, step))
    out.append(_polyline(p, [(t, m) for t, m, _ in lpoints], "lux-mean"))
    out.append(_polyline(p, [(t, m) for t, _, m in lpoints], "lux-max"))
    for name, value in limits.items():
        y = p.y(value)
        out.append(
            f'<line class="light-limit" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"'
            f' data-limit-lux="{value:g}" data-name="{name}"/>'
            f'<text class="label limit-label" x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end">'
            f"{escape(name.replace('_', ' '))} {value:g}</text>"
        )
    return "".join(out)


def _nice_step(hi: float) -> float:
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if hi / step <= 8:
            return float(step)
    return float(10 ** len(str(int(hi))))


def _range(lo: float, hi: float, step: float) -> list[float]:
    out, v = [], lo
    while v <= hi + 1e-9:
        out.append(round(v, 6))
        v += step
    return out
