"""Plots drawn with matplotlib: a notice's evidence plot and an evidence bundle's day plots.

    sound / light / turbidity readings, events ──► evidence_plot (PNG) ──► HTML and PDF notices
    per-minute levels of a bundle's day ──► day_plot (Figure) ──► figure_png ──► the bundle

Both share one figure set-up. matplotlib (and numpy) are imported inside the functions that
draw, never when this module is: `minewatch status` and the verifier import without them.
Plots use matplotlib's object API on the Agg canvas, never pyplot, so drawing is safe in a
worker thread. Readings and events come from the journal (monitor/journal/queries.py).
"""

from __future__ import annotations

import io
import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.journal import queries
from monitor.notify.document import PLOT_MARGIN, measurements
from monitor.notify.notices import (
    Notice,
    NoticeEpisode,
    duration_text,
    episode_window,
    limit_text,
    measurement_text,
    quantity_text,
)
from monitor.wire.canonical import from_us
from monitor.wire.codec import event_from_row
from rules.citation import citation_text, is_section
from rules.model import Blast, TruckPassage, WorkPeriod
from rules.profile import Profile, load_profile

__all__ = [
    "LUX_FLOOR",
    "Span",
    "day_plot",
    "evidence_figure",
    "evidence_plot",
    "figure_png",
    "plot_limits",
    "plotted_limit",
]

NOISE_RULES = frozenset({"noise"})
LIGHT_RULES = frozenset({"light_trespass", "high_intensity_light", "upward_light", "flashing_light"})
TURBIDITY_RULES = frozenset({"turbidity"})
SOUND_UNITS = frozenset({"dB(A)", "dB"})
LUX_FLOOR = 0.01  # the log axis's floor: darker readings are drawn here
_GAP_MIN_S = 5  # missing runs at least this long are shaded "no data"
_READING_GAP = timedelta(minutes=2)  # per-period readings (light, turbidity): a longer silence is "no data"


@dataclass(frozen=True, slots=True)
class Span:
    """A shaded interval on the plot: an exempt activity."""

    start: datetime
    end: datetime
    label: str


# --------------------------------------------------------------------------- the notice's evidence plot


def evidence_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    *,
    site: SiteConfig | None = None,
    profile: Profile | None = None,
    margin: timedelta = PLOT_MARGIN,
) -> bytes | None:
    """A PNG of the levels around the notice's first episode, or None when the standard has no series."""
    fig = evidence_figure(conn, notice, site=site, profile=profile, margin=margin)
    return None if fig is None else figure_png(fig)


def evidence_figure(
    conn: sqlite3.Connection,
    notice: Notice,
    *,
    site: SiteConfig | None = None,
    profile: Profile | None = None,
    margin: timedelta = PLOT_MARGIN,
) -> Any | None:
    """The plot as a matplotlib Figure (tests read its limit line), or None without a series."""
    if not notice.episodes:
        return None
    rule = str(notice.data.get("rule", ""))
    episode = notice.episodes[0]
    if rule in NOISE_RULES:
        return _noise_plot(conn, notice, episode, site, profile, margin)
    if rule in LIGHT_RULES:
        return _readings_plot(conn, notice, episode, profile, margin, _LIGHT_SERIES)
    if rule in TURBIDITY_RULES:
        return _readings_plot(conn, notice, episode, profile, margin, _TURBIDITY_SERIES)
    return None  # blasting and hours standards: the facts table tells it


# Which profile param is the limit of the plotted quantity, by rule, where a notice's own
# measurements do not carry it (notices issued before every measurement was kept).
_LIMIT_PARAMS = {
    "noise": "limit_db",
    "light_trespass": "limit_lux",
    "high_intensity_light": "max_lux",
    "turbidity": "max_ntu",
}


def _plotted_measurement(episode: NoticeEpisode, units: frozenset[str]) -> Mapping[str, Any] | None:
    """The notice's measurement of the plotted quantity (the first in its unit with a limit)."""
    return next(
        (m for m in measurements(episode.facts) if m.get("unit") in units and m.get("limit") is not None),
        None,
    )


def plotted_limit(
    notice: Notice, episode: NoticeEpisode, units: frozenset[str], profile: Profile | None
) -> float | None:
    """The limit of the plotted quantity, in the plotted unit: the notice's own limit for it."""
    measured = _plotted_measurement(episode, units)
    if measured is not None:
        return float(measured["limit"])
    name = _LIMIT_PARAMS.get(str(notice.data.get("rule", "")))
    if profile is not None and name and notice.standard in profile.standards:
        value = getattr(profile.params(notice.standard), name, None)
        return float(value) if isinstance(value, int | float) else None
    return None


def _other_limits_text(episode: NoticeEpisode, units: frozenset[str]) -> str:
    """The notice's limits other than the plotted line's (a duration, a depth, a rise), as text."""
    drawn = _plotted_measurement(episode, units)
    lines = []
    for m in measurements(episode.facts):
        if m.get("limit") is None or m is drawn:
            continue
        if m.get("unit") == "s":
            lines.append(
                f"{m['name']}: {quantity_text(float(m['value']), 's')} ({duration_text(float(m['value']))}); "
                f"a violation only beyond {limit_text(float(m['limit']), 's')}"
            )
        else:
            lines.append(measurement_text(m))
    return "\n".join(lines)


def _limit_source(notice: Notice, profile: Profile | None) -> str:
    """Whose the drawn limit is, as the notice's "Numbers used" says: the section when the profile's
    ``[notice.sources]`` gives the ordinance's section (or names none), else the profile's."""
    name = _LIMIT_PARAMS.get(str(notice.data.get("rule", "")), "")
    sources = profile.notice.sources.get(notice.standard, {}) if profile is not None else {}
    source = sources.get(name, "")
    if profile is None or not source or is_section(source):
        return citation_text(source or notice.section)
    return f"profile {profile.name}; {citation_text(notice.section)} sets no number"


def _limit_line(ax: Any, limit: float, unit: str, source: str) -> None:
    ax.axhline(
        limit,
        color="#c92a2a",
        linestyle="--",
        linewidth=1.5,
        label=f"Limit {limit_text(limit, unit)} ({source})",
    )


def _note_box(ax: Any, text: str) -> None:
    if text:
        ax.text(
            0.01,
            0.98,
            text,
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=8.5,
            color="#222222",
            bbox={"facecolor": "white", "edgecolor": "#999999", "alpha": 0.9, "pad": 3.0},
        )


def _second_grid(start: datetime, end: datetime) -> list[datetime]:
    first = start.replace(microsecond=0)
    count = int((end - first).total_seconds())
    return [first + timedelta(seconds=i) for i in range(count)]


def _exempt_spans(
    conn: sqlite3.Connection,
    notice: Notice,
    sensors: Sequence[str],
    site: SiteConfig | None,
    profile: Profile | None,
    start: datetime,
    end: datetime,
) -> list[Span]:
    from rules.noise import NoiseParams

    params = NoiseParams()
    if profile is not None and notice.standard in profile.standards:
        candidate = profile.params(notice.standard)
        if isinstance(candidate, NoiseParams):
            params = candidate
    gates: set[str] | None = None
    if site is not None:
        gates = {g for s in sensors if (info := site.sensor(s)) is not None for g in info.gates}
    rows = queries.events_overlapping(conn, notice.site, start - timedelta(minutes=5), end)
    spans: list[Span] = []
    for row in rows:
        if row["kind"] not in ("blast", "truck", "work"):
            continue
        event = event_from_row(row["kind"], row["data"], notice.site)
        if isinstance(event, Blast):
            spans.append(
                Span(
                    event.ts - timedelta(seconds=params.blast_margin_before_s),
                    event.ts + timedelta(seconds=params.blast_margin_after_s),
                    f"blast {event.id}",
                )
            )
        elif isinstance(event, TruckPassage) and (gates is None or event.gate in gates):
            spans.append(
                Span(
                    event.ts - timedelta(seconds=params.truck_margin_before_s),
                    event.ts + timedelta(seconds=params.truck_margin_after_s),
                    f"truck at gate {event.gate}",
                )
            )
        elif (
            isinstance(event, WorkPeriod)
            and event.kind.value in params.exempt_work_kinds
            and (not event.sensors or set(event.sensors) & set(sensors))
        ):
            spans.append(Span(event.start, event.end, f"{event.kind.value.replace('_', ' ')} work"))
    return _merge_spans(spans)


def _merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Overlapping spans of the same label become one (a queue of trucks is one shaded band)."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.label, s.start)):
        if merged and merged[-1].label == span.label and span.start <= merged[-1].end:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, span.end), span.label)
        else:
            merged.append(span)
    return sorted(merged, key=lambda s: s.start)


def _missing_runs(grid: Sequence[datetime], present: set[datetime]) -> list[tuple[datetime, datetime]]:
    runs: list[tuple[datetime, datetime]] = []
    run_start: datetime | None = None
    for ts in grid:
        if ts not in present:
            run_start = run_start or ts
        elif run_start is not None:
            runs.append((run_start, ts))
            run_start = None
    if run_start is not None:
        runs.append((run_start, grid[-1] + timedelta(seconds=1)))
    return [(a, b) for a, b in runs if (b - a).total_seconds() >= _GAP_MIN_S]


def _figure(width_in: float, height_in: float, dpi: int) -> tuple[Any, Any]:
    """One figure set-up for every plot (notices and evidence bundles): Agg canvas, never pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, color="#dddddd", linewidth=0.6)
    return fig, ax


def _time_axis(ax: Any, tz: ZoneInfo, label: str) -> None:
    from matplotlib import dates as mdates

    ax.set_xlabel(label)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=tz))  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=tz, minticks=5, maxticks=12))  # type: ignore[no-untyped-call]


def _log_lux_axis(ax: Any, values: Sequence[float], limit: float | None) -> None:
    """Illuminance spans 0.01 (a dark night) to 10,000 lux (an overcast day): a log axis shows both."""
    top = max([*values, limit or 0.0, 10.0])
    ax.set_yscale("log")
    ax.set_ylim(LUX_FLOOR, 10 ** math.ceil(math.log10(top * 1.5)))


def _new_axes(title: str, ylabel: str, tz: ZoneInfo, start: datetime) -> tuple[Any, Any]:
    fig, ax = _figure(11, 6.2, 100)
    ax.set_title(title, fontsize=12)
    ax.set_ylabel(ylabel)
    zone = start.astimezone(tz).strftime("%Z")
    _time_axis(ax, tz, f"Local time at the site ({zone}, {tz.key}), {start.astimezone(tz):%A %d %B %Y}")
    return fig, ax


def _shade_gaps(ax: Any, gaps: Sequence[tuple[datetime, datetime]]) -> None:
    """Hatched, labelled "no data": a reader must see that nothing was measured, not that it was quiet."""
    for index, (gap_start, gap_end) in enumerate(gaps):
        ax.axvspan(
            gap_start,
            gap_end,
            facecolor="none",
            edgecolor="#999999",
            hatch="///",
            linewidth=0,
            label="no data" if index == 0 else None,
        )
        ax.text(
            gap_start + (gap_end - gap_start) / 2,
            0.03,
            "no data",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="center",
            va="bottom",
            fontsize=7.5,
            color="#444444",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
        )


def _legend_below(ax: Any) -> None:
    """Under the plot, so it never hides a level or a label of a shaded period."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8.5, ncol=3, frameon=False)


def figure_png(fig: Any, *, fitted: bool = True, compress_level: int = 6) -> bytes:
    """The figure as PNG bytes. ``fitted``: margins fitted to the labels (tight_layout, a draw of
    its own); day_plot's figures have fixed margins and pass False. ``compress_level``: zlib's
    (a bundle's hundreds of day plots are written at 1: a fifth larger, drawn ~20 % faster)."""
    buffer = io.BytesIO()
    if fitted:
        fig.tight_layout()
    fig.savefig(buffer, format="png", pil_kwargs={"compress_level": compress_level})
    return buffer.getvalue()


def _noise_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    episode: NoticeEpisode,
    site: SiteConfig | None,
    profile: Profile | None,
    margin: timedelta,
) -> Any:
    import numpy as np

    window_start, window_end = episode_window(episode.facts, episode.start, episode.end)
    start, end = window_start - margin, window_end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    rows = queries.sound_laeq(conn, notice.site, sensors, start, end)
    tz = ZoneInfo(notice.timezone)
    limit = plotted_limit(notice, episode, SOUND_UNITS, profile)
    where = ", ".join(sensors)
    fig, ax = _new_axes(
        f"{notice.id}: sound level at {where} around the violation of {citation_text(notice.section)}",
        "Sound level at the boundary, dB(A)",
        tz,
        start,
    )
    grid = _second_grid(start, end)
    colors = ["#1f5fa8", "#7a3e9d", "#2b8a3e", "#b35c00"]
    levels_seen: list[float] = []
    gaps: list[tuple[datetime, datetime]] = []
    for index, sensor in enumerate(sensors):
        values = {from_us(r[1]).replace(microsecond=0): float(r[2]) for r in rows if r[0] == sensor}
        levels_seen += values.values()
        series = np.array([values.get(ts, math.nan) for ts in grid], dtype=np.float64)  # NaN breaks the line
        color = colors[index % len(colors)]
        ax.plot(
            grid, series, color=color, linewidth=0.6, alpha=0.45, label=f"{sensor}: each second (LAeq,1s)"
        )
        by_minute: dict[datetime, list[float]] = {}
        for ts, value in values.items():
            by_minute.setdefault(ts.replace(second=0), []).append(value)
        minute_x: list[datetime] = []
        minute_y: list[float] = []
        minute = start.replace(second=0, microsecond=0)
        while minute < end:
            chunk = by_minute.get(minute, [])
            minute_x += [minute, minute + timedelta(minutes=1)]
            # A minute's energy average; a minute without data is a break in the line.
            level = 10 * math.log10(sum(10 ** (v / 10) for v in chunk) / len(chunk)) if chunk else math.nan
            minute_y += [level, level]
            minute += timedelta(minutes=1)
        ax.plot(
            minute_x, minute_y, color=color, linewidth=2.2, label=f"{sensor}: 1-minute average (LAeq,1min)"
        )
        gaps += _missing_runs(grid, set(values))
    _shade_gaps(ax, gaps)
    ax.axvspan(window_start, window_end, color="#e03131", alpha=0.08, label="violation episode")
    exempt_labelled = False
    for span in _exempt_spans(conn, notice, sensors, site, profile, start, end):
        ax.axvspan(
            max(span.start, start),
            min(span.end, end),
            color="#f2b705",
            alpha=0.30,
            label=None if exempt_labelled else "exempt activity (not counted)",
        )
        exempt_labelled = True
        ax.text(
            max(span.start, start) + (min(span.end, end) - max(span.start, start)) / 2,
            0.97,
            span.label,
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="center",
            va="top",
            fontsize=7.5,
            color="#6b4f00",
        )
    if limit is not None:
        _limit_line(ax, limit, "dB(A)", _limit_source(notice, profile))
    _note_box(ax, _other_limits_text(episode, SOUND_UNITS))
    if levels_seen:
        low = min(min(levels_seen), float(limit) if limit is not None else math.inf)
        high = max(max(levels_seen), float(limit) if limit is not None else -math.inf)
        ax.set_ylim(math.floor(low / 5) * 5 - 5, math.ceil(high / 5) * 5 + 8)
    elif limit is not None:
        ax.set_ylim(float(limit) - 30, float(limit) + 15)
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#555555")
    ax.set_xlim(start, end)
    _legend_below(ax)
    return fig


@dataclass(frozen=True, slots=True)
class _Series:
    """A per-period reading kind plotted around an episode: its table kind, field and unit."""

    kind: str
    field: str
    unit: str
    units: frozenset[str]  # measurement units of this quantity
    what: str  # "light", "turbidity"
    ylabel: str
    log: bool


_LIGHT_SERIES = _Series(
    "light", "lux_mean", "lx", frozenset({"lx", "lux"}), "light", "Illuminance, lux (log scale)", True
)
_TURBIDITY_SERIES = _Series(
    "turbidity", "ntu", "NTU", frozenset({"NTU"}), "turbidity", "Turbidity, NTU", False
)


def _readings_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    episode: NoticeEpisode,
    profile: Profile | None,
    margin: timedelta,
    series: _Series,
) -> Any:
    window_start, window_end = episode_window(episode.facts, episode.start, episode.end)
    start, end = window_start - margin, window_end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    rows = queries.readings_of(conn, notice.site, series.kind, sensors, start, end)
    tz = ZoneInfo(notice.timezone)
    where = ", ".join(sensors)
    fig, ax = _new_axes(
        f"{notice.id}: {series.what} at {where} around the violation of {citation_text(notice.section)}",
        series.ylabel,
        tz,
        start,
    )
    gaps: list[tuple[datetime, datetime]] = []
    seen: list[float] = []
    for sensor in sensors:
        xs: list[datetime] = []
        ys: list[float] = []
        previous_end: datetime | None = None
        for r in rows:
            if r[0] != sensor:
                continue
            ts = from_us(r[1])
            if previous_end is not None and (ts - previous_end).total_seconds() > 2 * float(r[2]):
                xs.append(previous_end)
                ys.append(math.nan)  # a gap in the readings breaks the line
                gaps.append((previous_end, ts))
            value = float(json.loads(r[3])[series.field])
            seen.append(value)
            xs.append(ts)
            # On the log axis darkness (0 lux) is drawn at its floor, not dropped.
            ys.append(max(value, LUX_FLOOR) if series.log else value)
            previous_end = ts + timedelta(seconds=float(r[2]))
        ax.plot(xs, ys, linewidth=1.6, label=f"{sensor}: {series.field.replace('_', ' ')}")
        # Before the first and after the last reading nothing was measured either: say so.
        first = next((from_us(r[1]) for r in rows if r[0] == sensor), None)
        if first is None or first - start > _READING_GAP:
            gaps.append((start, first or end))
        if previous_end is not None and end - previous_end > _READING_GAP:
            gaps.append((previous_end, end))
    _shade_gaps(ax, gaps)
    ax.axvspan(window_start, window_end, color="#e03131", alpha=0.08, label="violation episode")
    limit = plotted_limit(notice, episode, series.units, profile)
    if limit is not None:
        _limit_line(ax, limit, series.unit, _limit_source(notice, profile))
    note = _other_limits_text(episode, series.units)
    if limit is None:
        note = f"{citation_text(notice.section, capital=True)} sets no {series.what} level limit.\n" + note
    _note_box(ax, note.strip())
    if series.log:
        _log_lux_axis(ax, seen, limit)
    ax.set_xlim(start, end)
    _legend_below(ax)
    return fig


# --------------------------------------------------------------------------- evidence bundle day plots


def plot_limits(site: SiteConfig, profile: Profile | None = None) -> dict[str, list[tuple[str, float]]]:
    """sensor -> [(label, value)]: the limit lines of the standards that judge it, in its plot's unit.

    Sound: each noise standard whose placements include the sensor's (dB). Light at the boundary:
    the light trespass limit (night only) and the high-intensity limit (lux). Durations and
    relative thresholds (upward light) have no line.
    """
    if profile is None:
        profile = load_profile(site.profile, site.agreement)
    limits: dict[str, list[tuple[str, float]]] = {}
    for sensor in site.sensors:
        for standard in profile.standards.values():
            params = standard.params
            if sensor.kind.value == "sound" and standard.rule == "noise":
                if sensor.placement.value in getattr(params, "placements", ()):
                    metric = getattr(params, "metric", "LAeq")
                    limits.setdefault(sensor.id, []).append(
                        (
                            f"{standard.section} limit {params.limit_db:g} dB ({metric})",
                            float(params.limit_db),
                        )
                    )
            elif sensor.kind.value == "light":
                if standard.rule == "light_trespass" and sensor.info().at_boundary:
                    value = float(params.limit_lux)
                    limits.setdefault(sensor.id, []).append(
                        (
                            f"{standard.section} limit {value:g} lux at night, "
                            f"longer than {params.min_duration_s:g} s",
                            value,
                        )
                    )
                elif standard.rule == "high_intensity_light":
                    value = float(params.max_lux)
                    limits.setdefault(sensor.id, []).append(
                        (f"{standard.section} limit {value:g} lux", value)
                    )
    return limits


def day_plot(
    measurement: str,
    sensor: str,
    site_name: str,
    day: date,
    zone: ZoneInfo,
    minutes: Mapping[int, tuple[float, float, float]],
    limits: Sequence[tuple[str, float]],
) -> Any:
    """One sensor's day, per minute, for an evidence bundle: sound in dB(A), light in lux (log)."""
    keys = sorted(minutes)
    times: Any = [datetime.fromtimestamp(m * 60, zone) for m in keys]  # matplotlib's stubs want numbers
    fig, ax = _figure(11, 4, 90)
    if measurement == "sound":
        mean = [10 * math.log10(minutes[m][0] / minutes[m][1]) for m in keys]
        peak = [minutes[m][2] for m in keys]
        ax.plot(times, peak, lw=0.6, color="tab:orange", label="loudest second LAeq,1s in the minute")
        ax.plot(times, mean, lw=0.9, color="tab:blue", label="LAeq per minute (from the per-second LAeq)")
        ax.set_ylabel("dB(A)")
        seen = peak
    else:
        mean = [max(minutes[m][0] / minutes[m][1], LUX_FLOOR) for m in keys]
        peak = [max(minutes[m][2], LUX_FLOOR) for m in keys]
        ax.plot(times, mean, lw=0.8, label="mean lux per minute")
        ax.plot(times, peak, lw=0.5, color="tab:orange", label="max lux per minute")
        ax.set_ylabel("lux (log scale)")
        seen = peak
    for label, value in limits:
        ax.axhline(value, color="tab:red", lw=1.0, ls="--", label=label)
    if measurement != "sound":
        _log_lux_axis(ax, seen, max((v for _, v in limits), default=None))
    _time_axis(ax, zone, f"local time ({zone.key})")
    ax.set_title(f"{site_name}: {sensor} {measurement}, {day.isoformat()}")
    ax.legend(loc="upper right", fontsize=7)
    # Fixed margins (tight_layout's, widened to the light plot's 10^4 ticks): every day plot has the
    # same labels, and fitting them cost a third of drawing a month's ~300 plots.
    fig.subplots_adjust(left=0.075, right=0.985, top=0.91, bottom=0.15)
    return fig
