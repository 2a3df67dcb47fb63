"""The site plan: the configuration's boundary, parcels, gates, monitors and dwellings drawn as
SVG on the server (no JavaScript), each monitor coloured by the state the status gives it.

Geographic points go onto the site's local metric plane (``monitor.geo.Plane``, equirectangular
about the middle of what is drawn: at a quarry's scale its error is far below a monitor's GPS
fix, see that module), then onto a canvas ``WIDTH`` units wide with north up, so the SVG's
``viewBox`` scales it to any screen. ``view`` says what a reader may see (an allow-list: the
public complaint page gets the boundary, gates and unnamed dwellings, never a monitor);
``svg`` draws a view; ``Canvas.latlon`` turns a click on the drawn plan back into a point.
Elements carry classes (``boundary``, ``parcel``, ``gate``, ``dwelling``, ``monitor``,
``scale-bar``, ``north-arrow``) and ``data-`` attributes so tests and stylesheets find them.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from monitor import geo
from monitor.config import SiteConfig
from rules.citation import citation_text

WIDTH = 800.0  # canvas units across; the height follows the site's shape
MARGIN = 90.0  # room for labels around the drawing
FOOT = 50.0  # below it: the scale bar
FONT_UNITS = 26.0  # the labels' font size in canvas units (the public plan's, shown smaller, is larger)
PUBLIC_FONT_UNITS = 34.0
MIN_SPAN_M = 200.0  # a plan of one point still shows its surroundings

# A monitor's state, as Portal.status gives it (one set of facts), and how the plan shows it.
STATE_LABELS = {
    "ok": "ok",
    "early_warning": "early warning",
    "violation": "violation",
    "offline": "offline",
    "not_shown": "state not shown",
}
STATE_COLOURS = {
    "ok": "#2e7d32",
    "early_warning": "#f9a825",
    "violation": "#c62828",
    "offline": "#757575",
    "not_shown": "#ffffff",
}
# What the public complaint page draws (disclose by allow-list): enough to find one's place.
PUBLIC_LAYERS = ("boundary", "gates", "dwellings")
ALL_LAYERS = ("boundary", "parcels", "gates", "monitors", "dwellings")


def _round_length(span_m: float) -> float:
    """The scale bar's length: the largest 1, 2 or 5 times a power of ten up to a quarter of
    ``span_m`` (the plan's width in metres)."""
    target = span_m / 4
    power = 10 ** math.floor(math.log10(target))
    return float(max(m * power for m in (1, 2, 5) if m * power <= target))


def states_offered(early_warnings: bool) -> tuple[str, ...]:
    """The states a reader's plan can give a monitor, its legend: "early warning" only where the
    early warnings are the reader's (``early_warnings``: the operator's, Portal's Sight)."""
    left_out = {"not_shown"} if early_warnings else {"not_shown", "early_warning"}
    return tuple(state for state in STATE_LABELS if state not in left_out)


def monitor_state(online: bool, in_episode: bool, warned: bool) -> str:
    """A monitor's state on the status and the plan: offline before anything it may have
    measured; then a violation episode it is part of; then an early warning about it; else ok."""
    if not online:
        return "offline"
    if in_episode:
        return "violation"
    if warned:
        return "early_warning"
    return "ok"


@dataclass(frozen=True, slots=True)
class Canvas:
    """The site's plane fitted onto the canvas: metres east/north to canvas units and back."""

    plane: geo.Plane
    west: float  # metres of the plane at the canvas's left margin
    north: float  # metres of the plane at the canvas's top margin
    scale: float  # canvas units per metre
    height: float

    def at(self, point: geo.LatLon) -> tuple[float, float]:
        x, y = self.plane.xy(point)
        return (MARGIN + (x - self.west) * self.scale, MARGIN + (self.north - y) * self.scale)

    def latlon(self, u: float, v: float) -> geo.LatLon:
        """The point drawn at canvas units (u, v)."""
        return self.plane.latlon(
            (self.west + (u - MARGIN) / self.scale, self.north - (v - MARGIN) / self.scale)
        )


def _points(site: SiteConfig, layers: Sequence[str]) -> list[geo.LatLon]:
    points: list[geo.LatLon] = []
    if "boundary" in layers:
        points += site.boundary
    if "parcels" in layers:
        points += [p for parcel in site.parcels for p in parcel.polygon]
    if "gates" in layers:
        points += [g.position for g in site.gates if g.position is not None]
    if "monitors" in layers:
        points += [s.position for s in site.sensors if s.position is not None]
    if "dwellings" in layers:
        points += [d.position for d in site.dwellings]
    return points


def canvas(site: SiteConfig, layers: Sequence[str] = ALL_LAYERS) -> Canvas | None:
    """The canvas fitting everything of ``layers`` the site configures; None when it gives nothing."""
    points = _points(site, layers)
    if not points:
        return None
    plane = geo.Plane.about(points)
    xy = [plane.xy(p) for p in points]
    xs, ys = [p[0] for p in xy], [p[1] for p in xy]
    span_x = max(max(xs) - min(xs), MIN_SPAN_M)
    span_y = max(max(ys) - min(ys), MIN_SPAN_M)
    scale = (WIDTH - 2 * MARGIN) / span_x
    mid_x, mid_y = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
    return Canvas(plane, mid_x - span_x / 2, mid_y + span_y / 2, scale, 2 * MARGIN + FOOT + span_y * scale)


def missing(site: SiteConfig) -> list[str]:
    """What the configuration lacks for a whole plan, in words (docs/CONFIG.md, The site plan)."""
    out = []
    if not site.boundary:
        out.append("the site boundary (sites.boundary)")
    unplaced = [s.id for s in site.sensors if s.position is None]
    if unplaced:
        out.append(f"the position of monitor{'s' if len(unplaced) > 1 else ''} {', '.join(unplaced)}")
    gates = [g.id for g in site.gates if g.position is None]
    if gates:
        out.append(f"the position of gate{'s' if len(gates) > 1 else ''} {', '.join(gates)}")
    if not site.dwellings:
        out.append("the nearest dwellings (sites.dwellings)")
    return out


def view(
    site: SiteConfig,
    layers: Sequence[str],
    states: Mapping[str, str] | None = None,
    chart: Callable[[str], str] | None = None,
    offered: Sequence[str] = (),
) -> dict[str, Any]:
    """What the plan shows one reader: only ``layers`` (the public page: ``PUBLIC_LAYERS``),
    monitors with their ``states`` (None: not shown to this reader), ``chart`` links and, as
    ``legend``, the states ``offered`` this reader (``states_offered``)."""
    frame = canvas(site, layers)
    out: dict[str, Any] = {
        "site": site.id,
        "name": site.name,
        "layers": list(layers),
        "drawn": frame is not None,
    }
    out["missing"] = (
        missing(site) if "monitors" in layers else ([] if site.boundary else ["the site boundary"])
    )
    if frame is None:
        return out
    out["width"], out["height"] = WIDTH, round(frame.height, 1)
    out["scale_m"] = _round_length(WIDTH / frame.scale)
    out["scale_units"] = out["scale_m"] * frame.scale

    def at(p: geo.LatLon) -> list[float]:
        return [round(c, 1) for c in frame.at(p)]

    if "boundary" in layers and site.boundary:
        out["boundary"] = [at(p) for p in site.boundary]
    if "parcels" in layers:
        out["parcels"] = [
            {"id": p.id, "name": p.name, "section": p.section, "points": [at(q) for q in p.polygon]}
            for p in site.parcels
        ]
    if "gates" in layers:
        out["gates"] = [{"id": g.id, "name": g.name, "at": at(g.position)} for g in site.gates if g.position]
    if "dwellings" in layers:
        named = "monitors" in layers  # the public page shows where a dwelling is, not whose
        out["dwellings"] = [
            {
                "id": d.id if named else f"d{i + 1}",
                "name": d.name if named else "dwelling",
                "at": at(d.position),
            }
            for i, d in enumerate(site.dwellings)
        ]
    if "monitors" in layers:
        out["legend"] = list(offered)
        out["monitors"] = [
            {
                "id": s.id,
                "kind": s.kind.value,
                "placement": s.placement.value,
                "location": s.location,
                "at": at(s.position),
                "state": (states or {}).get(s.id, "not_shown") if states is not None else "not_shown",
                "chart": chart(s.id) if chart else "",
            }
            for s in site.sensors
            if s.position is not None
        ]
    return out


# A label's box, in ems of its font: above and below its baseline, and the characters' widths
# (DejaVu Sans, the system-ui of Debian's chromium, rounded up: most lowercase and digits 0.64,
# m, w and capitals up to 1.0, spaces and i, l, j, t, f, r and punctuation 0.42).
ASCENT, DESCENT, CHAR_EM = 0.95, 0.26, 0.64
WIDE_EM, NARROW_EM = 1.0, 0.42
NARROW = frozenset(" iljtfr.,:;()'!|-")
LABEL_GAP = 4.0  # canvas units between a mark and its label
RINGS = 8  # how far out labels are tried: each ring 0.6 em further from the mark
# The eight sides of a mark a label is tried on, by angle (SVG's y runs down).
SIDES = tuple(
    (round(math.cos(math.radians(a))), round(-math.sin(math.radians(a)))) for a in range(0, 360, 45)
)


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned rectangle of the canvas (x0 < x1, y0 < y1)."""

    x0: float
    y0: float
    x1: float
    y1: float

    def meets(self, other: Box) -> bool:
        """True when the two share an area (touching edges do not)."""
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1

    def overlap(self, other: Box) -> float:
        return max(0.0, min(self.x1, other.x1) - max(self.x0, other.x0)) * max(
            0.0, min(self.y1, other.y1) - max(self.y0, other.y0)
        )


@dataclass(frozen=True, slots=True)
class Label:
    """A mark's label as placed: its lines from ``x`` (by ``anchor``) with the first baseline at
    ``y``, and the box they take; ``leader``: set away from its mark, joined to it by a line."""

    text: str
    lines: tuple[str, ...]
    cls: str
    x: float
    y: float
    anchor: str
    box: Box
    mark: Box
    leader: bool

    def svg(self, font: float) -> str:
        """The label's ``<text>``; styled by attributes, not the portal's stylesheet (the public
        plan is shown as an image)."""
        spans = "".join(
            f'<tspan x="{self.x:.1f}" dy="{0 if i == 0 else font:g}">{escape(line)}</tspan>'
            for i, line in enumerate(self.lines)
        )
        return (
            f'<text class="{self.cls}" x="{self.x:.1f}" y="{self.y:.1f}" text-anchor="{self.anchor}"'
            f' fill="#1d2428" paint-order="stroke" stroke="#fbfaf5" stroke-width="3">{spans}</text>'
        )

    def leader_svg(self) -> str:
        """A label set away: a line from its mark's middle to the nearest point of its box
        (drawn before the mark, which covers its start)."""
        if not self.leader:
            return ""
        mx, my = (self.mark.x0 + self.mark.x1) / 2, (self.mark.y0 + self.mark.y1) / 2
        lx, ly = min(max(mx, self.box.x0), self.box.x1), min(max(my, self.box.y0), self.box.y1)
        return (
            f'<line class="leader" x1="{mx:.1f}" y1="{my:.1f}" x2="{lx:.1f}" y2="{ly:.1f}"'
            ' stroke="#5b6870" stroke-width="1.5"/>'
        )


def text_ems(line: str) -> float:
    """About how wide ``line`` prints, in ems (never narrower than it does in DejaVu Sans)."""
    return sum(WIDE_EM if c in "mwMW" or c.isupper() else NARROW_EM if c in NARROW else CHAR_EM for c in line)


def _lines(text: str) -> tuple[str, ...]:
    """A long name on lines about as wide as the canvas can hold beside a mark."""
    return tuple(textwrap.wrap(text, 16)) if len(text) > 20 else (text,)


def _candidate(mark: Box, side: tuple[int, int], away: float, lines: Sequence[str], font: float) -> Label:
    """The label set ``away`` units off ``mark`` on ``side`` (dx, dy in -1, 0, 1)."""
    wide = font * max(text_ems(line) for line in lines)
    high = (len(lines) - 1 + ASCENT + DESCENT) * font
    dx, dy = side
    mx, my = (mark.x0 + mark.x1) / 2, (mark.y0 + mark.y1) / 2
    if dx > 0:
        x0, anchor, x = mark.x1 + away, "start", mark.x1 + away
    elif dx < 0:
        x0, anchor, x = mark.x0 - away - wide, "end", mark.x0 - away
    else:
        x0, anchor, x = mx - wide / 2, "middle", mx
    if dy > 0:
        y0 = mark.y1 + away
    elif dy < 0:
        y0 = mark.y0 - away - high
    else:
        y0 = my - high / 2
    box = Box(x0, y0, x0 + wide, y0 + high)
    return Label("", tuple(lines), "", x, y0 + ASCENT * font, anchor, box, mark, False)


def place_labels(
    wanted: Sequence[tuple[str, str, Box, tuple[float, float]]],
    obstacles: Sequence[Box],
    width: float,
    height: float,
    font: float,
) -> list[Label]:
    """Labels that print over no other label and no mark, deterministically: each of ``wanted``
    (text, class, its mark's box, the direction it prefers) in order tries the eight sides of
    its mark, nearest its preferred direction first, in rings further out, and takes the first
    place inside [0, width] x [0, height] that meets neither a label placed before nor one of
    ``obstacles`` (every mark). Where none is free, the place overlapping least. A label set
    beyond the first ring is joined to its mark by a leader line."""
    placed: list[Label] = []
    for text, cls, mark, prefer in wanted:
        lines = _lines(text)
        angle = math.atan2(prefer[1], prefer[0]) if prefer != (0.0, 0.0) else 0.0
        # Sides nearest the preferred direction first; a tie goes to the earlier side of SIDES.
        sides = sorted(
            SIDES,
            key=lambda s: abs(math.remainder(math.atan2(s[1], s[0]) - angle, math.tau)),
        )
        blocked = [*obstacles, *(p.box for p in placed)]
        best: tuple[float, Label] | None = None
        chosen = None
        for ring in range(RINGS):
            for side in sides:
                label = _candidate(mark, side, LABEL_GAP + ring * 0.6 * font, lines, font)
                b = label.box
                if b.x0 < 2 or b.y0 < 2 or b.x1 > width - 2 or b.y1 > height:
                    continue
                label = Label(text, lines, cls, label.x, label.y, label.anchor, b, mark, ring > 0)
                cost = sum(b.overlap(o) for o in blocked if o is not mark)
                if cost == 0:
                    chosen = label
                    break
                if best is None or cost < best[0]:
                    best = (cost, label)
            if chosen is not None:
                break
        if chosen is None:
            fallback = _candidate(mark, sides[0], LABEL_GAP, lines, font)
            chosen = (
                best[1]
                if best
                else Label(
                    text, lines, cls, fallback.x, fallback.y, fallback.anchor, fallback.box, mark, False
                )
            )
        placed.append(chosen)
    return placed


def _mark_boxes(plan: Mapping[str, Any]) -> dict[str, Box]:
    """The box each drawn mark takes (as ``svg`` draws them), by ``kind:id``."""
    out: dict[str, Box] = {}
    for m in plan.get("monitors", ()):
        x, y = m["at"]
        out[f"monitor:{m['id']}"] = Box(x - 15, y - 15, x + 15, y + 15)
    for g in plan.get("gates", ()):
        x, y = g["at"]
        out[f"gate:{g['id']}"] = Box(x - 11, y - 6, x + 11, y + 6)
    for d in plan.get("dwellings", ()):
        x, y = d["at"]
        out[f"dwelling:{d['id']}"] = Box(x - 10, y - 12, x + 10, y + 9)
    return out


def labels(plan: Mapping[str, Any], font: float = FONT_UNITS) -> dict[str, Label]:
    """Every label of the plan, placed (:func:`place_labels`), by ``kind:id`` of what it names:
    monitors first (small marks close together), then gates, dwellings and parcels. Each
    prefers the side away from the drawing's centre (a boundary's marks then keep their labels
    off its line and apart); a monitor's the side toward it (inside the boundary it stands on)."""
    if not plan.get("drawn"):
        return {}
    w, h = plan["width"], plan["height"]
    cx, cy = w / 2, (h - FOOT) / 2
    marks = _mark_boxes(plan)
    wanted: list[tuple[str, str, str, Box, tuple[float, float]]] = []

    def outward(box: Box, sign: float) -> tuple[float, float]:
        return (sign * ((box.x0 + box.x1) / 2 - cx), sign * ((box.y0 + box.y1) / 2 - cy))

    for m in plan.get("monitors", ()):
        box = marks[f"monitor:{m['id']}"]
        wanted.append((f"monitor:{m['id']}", m["id"], "label monitor-label", box, outward(box, -1)))
    for g in plan.get("gates", ()):
        box = marks[f"gate:{g['id']}"]
        wanted.append((f"gate:{g['id']}", g["name"] or g["id"], "label gate-label", box, outward(box, 1)))
    for d in plan.get("dwellings", ()):
        box = marks[f"dwelling:{d['id']}"]
        wanted.append((f"dwelling:{d['id']}", d["name"], "label dwelling-label", box, outward(box, 1)))
    for p in plan.get("parcels", ()):
        x = sum(q[0] for q in p["points"]) / len(p["points"])
        y = max(q[1] for q in p["points"])
        box = Box(x - 1, y - 1, x + 1, y + 1)
        wanted.append((f"parcel:{p['id']}", p["section"] or p["id"], "label parcel-label", box, (0.0, 1.0)))
    placed = place_labels(
        [(text, cls, box, prefer) for _, text, cls, box, prefer in wanted],
        list(marks.values()),
        w,
        h - FOOT,
        font,
    )
    return {key: label for (key, *_), label in zip(wanted, placed, strict=True)}


def svg(
    plan: Mapping[str, Any],
    *,
    element_id: str = "site-plan",
    chosen: tuple[float, float] | None = None,
    font: float = FONT_UNITS,
) -> str:
    """The plan as one ``<svg>`` that scales to its container (viewBox; width 100 % by CSS);
    ``chosen``: canvas units of a point marked with a cross (the complaint page's click)."""
    if not plan.get("drawn"):
        return ""
    w, h = plan["width"], plan["height"]
    placed = labels(plan, font)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{element_id}" class="siteplan"'
        f' viewBox="0 0 {w:g} {h:g}"'
        f' preserveAspectRatio="xMidYMid meet" font-size="{font:g}" font-family="system-ui, sans-serif"'
        f' role="img" aria-label="site plan of {escape(plan["name"])}">',
        f'<rect class="ground" x="0" y="0" width="{w:g}" height="{h:g}" fill="#fbfaf5"/>',
    ]
    if "boundary" in plan:
        points = " ".join(f"{x},{y}" for x, y in plan["boundary"])
        out.append(
            f'<polygon class="boundary" points="{points}" fill="#efe8d4" stroke="#5d4037" stroke-width="3">'
            "<title>site boundary</title></polygon>"
        )
    for p in plan.get("parcels", ()):
        points = " ".join(f"{x},{y}" for x, y in p["points"])
        words = p["name"] + (f" ({citation_text(p['section'])})" if p["section"] else "")
        out.append(
            f'<polygon class="parcel" data-parcel="{escape(p["id"])}" points="{points}" fill="#e3eef7"'
            f' stroke="#1565c0" stroke-width="2" stroke-dasharray="8 4">'
            f"<title>{escape(words)}</title></polygon>"
        )
        out.append(placed[f"parcel:{p['id']}"].leader_svg() + placed[f"parcel:{p['id']}"].svg(font))
    for g in plan.get("gates", ()):
        x, y = g["at"]
        out.append(
            f'<g class="gate" data-gate="{escape(g["id"])}"><title>{escape(g["name"] or g["id"])}</title>'
            + placed[f"gate:{g['id']}"].leader_svg()
            + f'<rect x="{x - 10:.1f}" y="{y - 5:.1f}" width="20" height="10" fill="#000" />'
            + placed[f"gate:{g['id']}"].svg(font)
            + "</g>"
        )
    for d in plan.get("dwellings", ()):
        x, y = d["at"]
        out.append(
            f'<g class="dwelling" data-dwelling="{escape(d["id"])}"><title>{escape(d["name"])}</title>'
            + placed[f"dwelling:{d['id']}"].leader_svg()
            + f'<polygon points="{x - 9:.1f},{y - 2:.1f} {x:.1f},{y - 11:.1f} {x + 9:.1f},{y - 2:.1f}"'
            ' fill="#6d4c41"/>'
            f'<rect x="{x - 7:.1f}" y="{y - 2:.1f}" width="14" height="10" fill="#6d4c41"/>'
            + placed[f"dwelling:{d['id']}"].svg(font)
            + "</g>"
        )
    for m in plan.get("monitors", ()):
        x, y = m["at"]
        state = m["state"]
        title = f"{m['id']} ({m['kind']}, {m['placement']}): {STATE_LABELS[state]}"
        if m["location"]:
            title += f"; {m['location']}"
        mark = placed[f"monitor:{m['id']}"].leader_svg() + (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="13" fill="{STATE_COLOURS[state]}" stroke="#212121"'
            f' stroke-width="2"/>' + placed[f"monitor:{m['id']}"].svg(font)
        )
        attrs = f'class="monitor state-{state}" data-sensor="{escape(m["id"])}" data-state="{state}"'
        if m["chart"]:
            out.append(f'<a href="{escape(m["chart"])}" {attrs}><title>{escape(title)}</title>{mark}</a>')
        else:
            out.append(f"<g {attrs}><title>{escape(title)}</title>{mark}</g>")
    if chosen is not None:
        cx, cy = chosen
        out.append(
            f'<g class="chosen"><title>the point you chose</title>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="12" fill="none" stroke="#c62828" stroke-width="3"/>'
            f'<path d="M{cx - 18:.1f},{cy:.1f}H{cx + 18:.1f}M{cx:.1f},{cy - 18:.1f}V{cy + 18:.1f}"'
            ' stroke="#c62828" stroke-width="2"/></g>'
        )
    # North up (the plane's y axis is true north), and a scale bar of a round length.
    nx, ny = w - 30, h - FOOT + 2
    out.append(
        f'<g class="north-arrow"><title>north</title>'
        f'<polygon points="{nx},{ny} {nx - 9},{ny + 26} {nx},{ny + 20} {nx + 9},{ny + 26}" fill="#212121"/>'
        f'<text x="{nx - 14}" y="{ny + 22}" text-anchor="end" class="label">N</text></g>'
    )
    bar, metres = plan["scale_units"], plan["scale_m"]
    by = h - FOOT / 2
    out.append(
        f'<g class="scale-bar" data-metres="{metres:g}" data-units="{bar:.2f}"><title>scale</title>'
        f'<rect x="{MARGIN}" y="{by - 4}" width="{bar:.1f}" height="8" fill="#212121"/>'
        f'<text x="{MARGIN + bar + 8:.1f}" y="{by + 5}" class="label">{metres:g} m</text></g>'
    )
    out.append("</svg>")
    return "".join(out)
