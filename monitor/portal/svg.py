"""The day and period views' plot, as SVG written here (no JavaScript, nothing fetched).

One panel per sound meter (per-minute LAeq up to a day, hourly LAeq with L10 and L90 beyond,
against the limit of the standard that judges it) and per light or sky sensor (mean and max
lux on a log axis: a 3 lux trespass and a 7,000 lux daylight both read). On every panel: the
exempt periods and the violation episodes shaded, each day's blast window and sunset, each
recorded blast and each unreported one. Marks whose labels would print over each other are
set on separate rows (:func:`label_rows`). Elements carry classes (``limit``, ``blast-window``,
``blast``, ``unreported-blast``, ``sunset``, ``exempt``, ``episode``) so tests and
stylesheets can find them.
"""

from __future__ import annotations

import functools
import math
import urllib.parse
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 960, 190, 56, 16, 24, 34
CHAR_W = 6.2  # px per character of an 11 px label (system-ui), a little generous
LABEL_ROW = 14  # px between rows of labels (an 11 px label's box is about 13 px high)
LUX_FLOOR = 0.01  # the log axis starts here: darker than any meter reads at night

# Time-axis steps (seconds), the first giving at most MAX_TICKS ticks is used.
_TICK_STEPS = (300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
MAX_TICKS = 12


@functools.lru_cache(maxsize=1 << 16)  # a day's 1,440 minute stamps recur on every panel and render
def _t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def label_rows(positions: Sequence[tuple[float, str]], char_w: float = CHAR_W, pad: float = 4.0) -> list[int]:
    """The row (0, 1, ...) of each label, written from its x to the right, so that no two labels
    on one row overlap: each takes the first row whose last label ends before it starts
    (greedy, in order of x). Returned in the order given."""
    order = sorted(range(len(positions)), key=lambda i: positions[i][0])
    ends: list[float] = []  # per row: where its last label ends
    rows = [0] * len(positions)
    for i in order:
        x, text = positions[i]
        row = next((r for r, end in enumerate(ends) if end + pad <= x), len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = x + len(text) * char_w
        rows[i] = row
    return rows


def spread(ys: Sequence[float], gap: float = LABEL_ROW) -> list[float]:
    """``ys`` moved apart (down) where two are closer than ``gap``, keeping their order: the
    baselines of labels beside horizontal lines."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    last = -math.inf
    for i in order:
        out[i] = max(ys[i], last + gap)
        last = out[i]
    return out


class _Panel:
    def __init__(self, view: Mapping[str, Any], top: float, lo: float, hi: float, log: bool = False) -> None:
        self.t0, self.t1 = _t(view["from"]), _t(view["to"])
        self.top, self.lo, self.hi, self.log = top, lo, hi, log

    def x(self, ts: str) -> float:
        return self.xt(_t(ts))

    def xt(self, t: float) -> float:
        span = self.t1 - self.t0
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max((t - self.t0) / span, 0.0), 1.0)

    def y(self, v: float) -> float:
        if self.log:
            v, lo, hi = math.log10(max(v, LUX_FLOOR)), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        v = min(max(v, lo), hi)
        return self.top + PANEL_H * (1 - (v - lo) / (hi - lo))


def time_ticks(t0: float, t1: float, zone: ZoneInfo) -> list[tuple[float, str]]:
    """(epoch seconds, label) of the time axis: a step giving at most MAX_TICKS ticks, on whole
    steps of site time (weeks from Monday); the date where a tick is a midnight."""
    step = next((s for s in _TICK_STEPS if (t1 - t0) / s <= MAX_TICKS), _TICK_STEPS[-1])
    local = datetime.fromtimestamp(t0, zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if step == 604800:
        midnight -= timedelta(days=midnight.weekday())
    out = []
    k = 0
    while True:
        # Wall-clock steps from midnight: ticks stay on whole hours across a DST change.
        moment = (midnight + timedelta(seconds=k * step)).replace(tzinfo=None).replace(tzinfo=zone)
        k += 1
        t = moment.timestamp()
        if t > t1 + 1:
            break
        if t < t0 - 1:
            continue
        if step >= 86400:
            text = moment.strftime("%a %d %b")
        elif moment.hour == 0 and moment.minute == 0:
            text = moment.strftime("%d %b")
        else:
            text = moment.strftime("%H:%M")
        out.append((t, text))
    return out


def episode_anchor(episode_id: str) -> str:
    """The period view's element id of an episode's findings (its group, or its line in the list
    of episodes when a filter leaves its group out): where its shading links for a reader who
    may not open its notice."""
    return f"episode-{episode_id}"


def episode_link(episode: Mapping[str, Any], *, to_notice: bool) -> str:
    """The opening ``<a>`` around an episode's shading, with its accessible title: to its notice
    (``to_notice``, for a reader the role allow-list lets open notices) or to its findings on
    the page. The plot is drawn once for every reader (cached per site and window) with the
    page links; :func:`with_notice_links` swaps in the notice links for a reader who may."""
    if to_notice and episode.get("notice"):
        href = f"/notices/{urllib.parse.quote(str(episode['notice']))}"
        where = f"open notice {episode['notice']}"
    else:
        href = "#" + urllib.parse.quote(episode_anchor(str(episode["id"])))
        where = "its findings on this page"
    return (
        f'<a class="episode-link" href="{escape(href)}" data-episode="{escape(str(episode["id"]))}">'
        f"<title>violation: {escape(str(episode['text']))} ({escape(where)})</title>"
    )


def with_notice_links(svg: str, episodes: Sequence[Mapping[str, Any]]) -> str:
    """The plot ``svg`` with each episode's shading linked to its notice instead of its findings
    on the page (an episode without a notice keeps its page link)."""
    for e in episodes:
        if e.get("notice"):
            svg = svg.replace(episode_link(e, to_notice=False), episode_link(e, to_notice=True))
    return svg


def _frame(
    p: _Panel, view: Mapping[str, Any], sensor: str, title: str, unit: str, ticks: Sequence[tuple[float, str]]
) -> list[str]:
    out = [
        f'<text x="{LEFT}" y="{p.top - 6:.1f}" class="title">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{p.top}" width="{WIDTH - LEFT - RIGHT}" height="{PANEL_H}" class="frame"/>',
    ]
    for e in view["exempt"]:
        if sensor not in e["sensors"]:
            continue
        x0, x1 = p.x(e["start"]), p.x(e["end"])
        out.append(
            f'<rect class="exempt" x="{x0:.1f}" y="{p.top}" width="{max(x1 - x0, 1):.1f}" height="{PANEL_H}">'
            f"<title>exempt: {escape(e['why'])}</title></rect>"
        )
    for d in view["days"]:
        w = d["blast_window"]
        x0, x1 = p.x(w["start"]), p.x(w["end"])
        if x1 > x0:
            out.append(
                f'<rect class="blast-window" x="{x0:.1f}" y="{p.top}" width="{x1 - x0:.1f}"'
                f' height="{PANEL_H}"'
                f' data-start="{w["start"]}" data-end="{w["end"]}"><title>blast window</title></rect>'
            )
    for e in view.get("episodes", ()):
        # The episodes every surface tells (one set of facts): the same span as the list beside,
        # drawn over the windows and at least 3 px wide, so a minute-long one shows on a month.
        if sensor not in e["sensors"]:
            continue
        x0, x1 = p.x(e["start"]), p.x(e["end"])
        out.append(
            episode_link(e, to_notice=False)
            + f'<rect class="episode" x="{x0:.1f}" y="{p.top}" width="{max(x1 - x0, 3):.1f}"'
            f' height="{PANEL_H}"'
            f' data-episode="{escape(e["id"])}" data-start="{e["start"]}" data-end="{e["end"]}"/></a>'
        )
    for v, text in ticks:
        y = p.y(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(text)}</text>'
        )
    out.append(
        f'<text class="tick" x="12" y="{p.top + PANEL_H / 2:.1f}"'
        f' transform="rotate(-90 12 {p.top + PANEL_H / 2:.1f})" text-anchor="middle">{escape(unit)}</text>'
    )
    for t, text in time_ticks(p.t0, p.t1, ZoneInfo(view["timezone"])):
        x = p.xt(t)
        out.append(f'<line class="hour" x1="{x:.1f}" x2="{x:.1f}" y1="{p.top}" y2="{p.top + PANEL_H}"/>')
        half = len(text) * CHAR_W / 2  # a label at an edge is set inside the plot's width
        anchor = "end" if x + half > WIDTH else "start" if x - half < 0 else "middle"
        out.append(
            f'<text class="tick time-tick" x="{x:.1f}" y="{p.top + PANEL_H + 14}" text-anchor="{anchor}">'
            f"{escape(text)}</text>"
        )
    out += _marks(p, view, sensor)
    return out


def _marks(p: _Panel, view: Mapping[str, Any], sensor: str) -> list[str]:
    """Sunsets, blasts and unreported blasts: a line each, and labels laid out on rows so that
    none prints over another (two blasts a minute apart on a day's axis are 0.7 px apart)."""
    marks: list[tuple[str, str, str, str]] = []  # (ts, label, data attributes, title)
    for d in view["days"]:
        if d["sunset"] and view["from"] <= d["sunset"] < view["to"]:
            marks.append((d["sunset"], "sunset", "", "sunset"))
    for b in view["blasts"]:
        blast = escape(str(b["id"]))
        marks.append((b["ts"], "blast", f' data-blast="{blast}"', f"blast {blast}"))
    for u in view.get("unreported_blasts", ()):
        if sensor in u["sensors"]:
            title = f"unreported blast: {escape(u['summary'][:200])}"
            marks.append((u["ts"], "unreported blast", f' data-finding="{escape(u["finding"])}"', title))
    xs = [p.x(ts) for ts, *_ in marks]
    rows = label_rows([(x + 3, label) for x, (_, label, _, _) in zip(xs, marks, strict=True)])
    out = []
    for x, (ts, label, attributes, title), row in zip(xs, marks, rows, strict=True):
        cls = label.replace(" ", "-")
        out.append(
            f'<line class="{cls}" x1="{x:.1f}" x2="{x:.1f}" y1="{p.top}" y2="{p.top + PANEL_H}"'
            f' data-ts="{ts}"{attributes}><title>{title}</title></line>'
            f'<text class="label {cls}-label" x="{x + 3:.1f}" y="{p.top + 12 + row * LABEL_ROW}"'
            f' data-row="{row}">{label}</text>'
        )
    return out


def _polyline(
    p: _Panel, points: Sequence[tuple[Any, ...]], cls: str, index: int = 1, gap_s: float = 90
) -> str:
    """Lines between consecutive points; a gap in the data is a gap in the line."""
    parts: list[str] = []
    run: list[str] = []
    last = None
    for point in points:
        ts, v = point[0], point[index]
        t = _t(ts)
        if last is not None and t - last > gap_s and run:
            parts.append(" ".join(run))
            run = []
        run.append(f"{p.x(ts):.1f},{p.y(v):.1f}")
        last = t
    if run:
        parts.append(" ".join(run))
    out = []
    for r in parts:
        out.append(f'<polyline class="{cls}" points="{r}"/>')
        if r.count(" ") < 10:  # a few points alone: dots, or they would hardly show
            for xy in r.split():
                x, y = xy.split(",")
                out.append(f'<circle class="{cls}-dot" cx="{x}" cy="{y}" r="2"/>')
    return "".join(out)


def day_svg(view: Mapping[str, Any]) -> str:
    return DayPlot().render(view)


class DayPlot:
    """The plot of one period view, re-rendered panel by panel: a panel whose points, position
    and shared marks (windows, blasts, exempt periods, sunsets, limits) are unchanged since the
    last render is reused as it was. Today's view gains a minute or two of one meter between two
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

    def render(self, view: Mapping[str, Any]) -> str:
        marks = (
            view["from"],
            view["to"],
            view["timezone"],
            view["resolution"],
            repr(view["exempt"]),
            repr(view.get("episodes")),
            repr(view["days"]),
            repr(view["blasts"]),
            repr(view.get("unreported_blasts")),
            repr(view["sensors"]),
            repr(view["light_limits"]),
        )
        kinds = {s["id"]: s for s in view["sensors"]}
        panels: list[str] = []
        used: set[tuple[str, str]] = set()
        top = TOP
        for sensor, points in view["sound"].items():
            panels.append(
                self._panel(
                    "sound",
                    sensor,
                    (top, marks, points),
                    functools.partial(_sound_panel, view, kinds.get(sensor, {}), sensor, points, top),
                )
            )
            used.add(("sound", sensor))
            top += PANEL_H + TOP + GAP
        for sensor, lpoints in view["light"].items():
            panels.append(
                self._panel(
                    "light",
                    sensor,
                    (top, marks, lpoints),
                    functools.partial(_light_panel, view, kinds.get(sensor, {}), sensor, lpoints, top),
                )
            )
            used.add(("light", sensor))
            top += PANEL_H + TOP + GAP
        for gone in set(self._panels) - used:
            del self._panels[gone]
        height = top
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="dayplot" viewBox="0 0 {WIDTH} {height}"'
            f' width="{WIDTH}" height="{height}" role="img" aria-label="levels, {escape(view["span"])}">'
            + "".join(panels)
            + "</svg>"
        )


def _sound_panel(
    view: Mapping[str, Any],
    info: Mapping[str, Any],
    sensor: str,
    points: Sequence[tuple[Any, ...]],
    top: float,
) -> str:
    limit = info.get("limit_db")
    hourly = view["resolution"] == "hour"
    values = [v for point in points for v in point[1:]]
    lo = min([30.0, *values])
    hi = max([(limit if limit is not None else 80.0) + 20, *values])
    lo, hi = 10 * (lo // 10), 10 * (hi // 10 + 1)
    p = _Panel(view, top, lo, hi)
    what = "hourly LAeq, L10, L90" if hourly else "LAeq per minute"
    judged = f", {info['placement']}, {info['standard']}" if info.get("standard") else ""
    out = [f'<g class="panel sound-panel" id="panel-{escape(sensor)}" data-sensor="{escape(sensor)}">']
    out += _frame(
        p,
        view,
        sensor,
        f"{sensor}: {what}{judged}",
        "dB(A)",
        [(v, f"{v:g}") for v in range(int(lo), int(hi) + 1, 10)],
    )
    if hourly:
        out.append(_polyline(p, points, "l10", 2, gap_s=5400))
        out.append(_polyline(p, points, "l90", 3, gap_s=5400))
    out.append(_polyline(p, points, "level", 1, gap_s=5400 if hourly else 90))
    if limit is not None:
        y = p.y(limit)
        out.append(
            f'<line class="limit" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"'
            f' data-limit-db="{limit:g}"><title>limit {limit:g} dB(A)</title></line>'
            f'<text class="label limit-label" x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end">'
            f"limit {limit:g} dB(A) ({escape(info['standard'])})</text>"
        )
    if not points:
        out.append(f'<text class="empty" x="{WIDTH / 2}" y="{top + PANEL_H / 2}">no readings</text>')
    out.append("</g>")
    return "".join(out)


def lux_decades(values: Sequence[float]) -> tuple[float, float]:
    """The log axis' ends: whole decades from LUX_FLOOR (or below the lowest reading) to above
    the highest value (at least 10 lux)."""
    positive = [v for v in values if v > 0]
    lo = min([LUX_FLOOR, *positive])
    hi = max([10.0, *positive])
    return 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi) + 1e-9)


def _light_panel(
    view: Mapping[str, Any],
    info: Mapping[str, Any],
    sensor: str,
    lpoints: Sequence[tuple[str, float, float]],
    top: float,
) -> str:
    # The light limits are judged at the light meters; a sky sensor's upward light has none.
    limits = view["light_limits"] if info.get("kind") == "light" else {}
    lo, hi = lux_decades([*(v for _, m, x in lpoints for v in (m, x)), *limits.values()])
    p = _Panel(view, top, lo, hi, log=True)
    decades = range(round(math.log10(lo)), round(math.log10(hi)) + 1)
    ticks = [(10.0**d, f"{10.0**d:g}") for d in decades]
    what = "sky light" if info.get("kind") == "sky" else "light"
    out = [f'<g class="panel light-panel" id="panel-{escape(sensor)}" data-sensor="{escape(sensor)}">']
    out += _frame(p, view, sensor, f"{sensor}: {what} (mean, max; log scale)", "lux", ticks)
    out.append(
        _polyline(
            p, [(t, m) for t, m, _ in lpoints], "lux-mean", gap_s=5400 if view["resolution"] == "hour" else 90
        )
    )
    out.append(
        _polyline(
            p, [(t, m) for t, _, m in lpoints], "lux-max", gap_s=5400 if view["resolution"] == "hour" else 90
        )
    )
    named = sorted(limits.items(), key=lambda kv: -kv[1])
    ys = [p.y(v) for _, v in named]
    for (name, value), y, y_text in zip(named, ys, spread([y - 4 for y in ys]), strict=True):
        out.append(
            f'<line class="light-limit" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"'
            f' data-limit-lux="{value:g}" data-name="{name}"/>'
            f'<text class="label limit-label" x="{WIDTH - RIGHT - 4}" y="{y_text:.1f}" text-anchor="end">'
            f"{escape(name.replace('_', ' '))} {value:g}</text>"
        )
    if not lpoints:
        out.append(f'<text class="empty" x="{WIDTH / 2}" y="{top + PANEL_H / 2}">no readings</text>')
    out.append("</g>")
    return "".join(out)
