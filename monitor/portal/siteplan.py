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
) -> dict[str, Any]:
    """What the plan shows one reader: only ``layers`` (the public page: ``PUBLIC_LAYERS``),
    monitors with their ``states`` (None: not shown to this reader) and ``chart`` links."""
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


def _label(
    x: float, y: float, text: str, cls: str, centre: tuple[float, float], away: float, font: float
) -> str:
    """A label ``away`` units from its mark, on the side away from the drawing's centre (inward
    for a negative ``away``): a boundary's marks then keep their labels off its line and apart."""
    dx, dy = x - centre[0], y - centre[1]
    norm = math.hypot(dx, dy) or 1.0
    ux, uy = dx / norm * (1 if away > 0 else -1), dy / norm * (1 if away > 0 else -1)
    anchor = "start" if ux > 0.5 else ("end" if ux < -0.5 else "middle")
    lx, ly = x + ux * abs(away), y + uy * abs(away) + 6
    # A long name on two lines, each about as wide as the canvas can hold beside a mark.
    lines = textwrap.wrap(text, 16) if len(text) > 20 else [text]
    wide = 0.55 * font * max(len(line) for line in lines)  # about
    left = {"start": lx, "end": lx - wide, "middle": lx - wide / 2}[anchor]
    if left < 4 or left + wide > WIDTH - 4:
        # No room beside the mark: above it, against the canvas's edge.
        anchor, lx = ("start", 4.0) if left < 4 else ("end", WIDTH - 4)
        ly = y - font * len(lines) + 4
    if uy < -0.5 and len(lines) > 1 and not (left < 4 or left + wide > WIDTH - 4):
        ly -= font * (len(lines) - 1)  # above the mark: the last line ends where one line would
    spans = "".join(
        f'<tspan x="{lx:.1f}" dy="{0 if i == 0 else font:g}">{escape(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    # Styled by attributes, not the portal's stylesheet: the public plan is shown as an image.
    return (
        f'<text class="{cls}" x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" fill="#1d2428"'
        f' paint-order="stroke" stroke="#fbfaf5" stroke-width="3">{spans}</text>'
    )


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
    centre = (w / 2, (h - FOOT) / 2)
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
        words = p["name"] + (f" (section {p['section']})" if p["section"] else "")
        out.append(
            f'<polygon class="parcel" data-parcel="{escape(p["id"])}" points="{points}" fill="#e3eef7"'
            f' stroke="#1565c0" stroke-width="2" stroke-dasharray="8 4">'
            f"<title>{escape(words)}</title></polygon>"
        )
        x = sum(q[0] for q in p["points"]) / len(p["points"])
        y = max(q[1] for q in p["points"])
        out.append(_label(x, y, p["section"] or p["id"], "label parcel-label", centre, 18, font))
    for g in plan.get("gates", ()):
        x, y = g["at"]
        out.append(
            f'<g class="gate" data-gate="{escape(g["id"])}"><title>{escape(g["name"] or g["id"])}</title>'
            f'<rect x="{x - 10:.1f}" y="{y - 5:.1f}" width="20" height="10" fill="#000" />'
            + _label(x, y, g["name"] or g["id"], "label gate-label", centre, 6 + font * 0.6, font)
            + "</g>"
        )
    for d in plan.get("dwellings", ()):
        x, y = d["at"]
        out.append(
            f'<g class="dwelling" data-dwelling="{escape(d["id"])}"><title>{escape(d["name"])}</title>'
            f'<polygon points="{x - 9:.1f},{y - 2:.1f} {x:.1f},{y - 11:.1f} {x + 9:.1f},{y - 2:.1f}"'
            ' fill="#6d4c41"/>'
            f'<rect x="{x - 7:.1f}" y="{y - 2:.1f}" width="14" height="10" fill="#6d4c41"/>'
            + _label(x, y, d["name"], "label dwelling-label", centre, 6 + font * 0.8, font)
            + "</g>"
        )
    for m in plan.get("monitors", ()):
        x, y = m["at"]
        state = m["state"]
        title = f"{m['id']} ({m['kind']}, {m['placement']}): {STATE_LABELS[state]}"
        if m["location"]:
            title += f"; {m['location']}"
        mark = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="13" fill="{STATE_COLOURS[state]}" stroke="#212121"'
            f' stroke-width="2"/>' + _label(x, y, m["id"], "label monitor-label", centre, -22, font)
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
