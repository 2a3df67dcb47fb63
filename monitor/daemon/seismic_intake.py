"""Seismograph messages into the journal: waveform chunks, the seismograph's own summary, and
the daemon's summary recomputed from the waveforms once every chunk of an event is stored.

    waveform chunk ─► Store.append_waveform (chained) ─► all chunks in? ─► seismic.chunks.join
                      ─► seismic.summary.summarize ─► Store.append_seismic("seismic-waveforms")
    seismic summary ─► Store.append_seismic("seismic") (as it came: the edge's word)
    both journaled ─► seismic.agreement.disagreements ─► Taken.disagreements (the pipeline alerts)

Both summaries are journaled; the rules judge the daemon's when it exists (codec.seismic_events).
Runs in the pipeline's write transaction; a chunk set that does not join (headers differ, a gap)
is logged in one line and kept, and judged on the seismograph's own summary.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.errors import DecodeError
from monitor.journal.store import Appended, Store
from monitor.seismic.agreement import Disagreement, disagreements
from monitor.seismic.chunks import disagreement, join
from monitor.seismic.summary import summarize
from monitor.wire.canonical import from_us
from monitor.wire.codec import SeismicSummary, WaveformChunk

log = logging.getLogger("minewatch.seismic")


@dataclass(frozen=True, slots=True)
class Taken:
    """What a seismograph message did: stored (or not, or a conflict), and an event summary
    stored now (its start and length, for the minutes to judge again)."""

    appended: Appended
    summary_at: tuple[datetime, float] | None = None
    # the event's two summaries, both now journaled, where they disagree (seismic.agreement)
    disagreements: tuple[Disagreement, ...] = ()
    event_id: str = ""


def take_summary(store: Store, summary: SeismicSummary, now: datetime) -> Taken:
    appended = store.append_seismic(
        summary.site, summary.sensor, "seismic", summary.ts, summary.duration_s, summary.payload, now
    )
    if not appended.stored:
        return Taken(appended)
    found = compared(store, summary.site, summary.sensor, summary.ts)
    return Taken(appended, (summary.ts, summary.duration_s), found, summary.event_id)


def compared(store: Store, site: str, sensor: str, ts: datetime) -> tuple[Disagreement, ...]:
    """The disagreements of an event's edge and daemon summaries (none until both are journaled)."""
    rows = {
        r["kind"]: r
        for r in store.seismic_between(site, ts, ts + timedelta(microseconds=1))
        if r["sensor"] == sensor
    }
    if set(rows) != {"seismic", "seismic-waveforms"}:
        return ()
    edge, daemon = (json.loads(rows[k]["data"])["summary"] for k in ("seismic", "seismic-waveforms"))
    return disagreements(edge, daemon)


def take_chunk(store: Store, chunk: WaveformChunk, now: datetime) -> Taken:
    """Journal a chunk; recompute the event's summary once all its chunks are in. A chunk that
    describes another event than the chunks already held (its samples_total, rate, ...) is
    refused (DecodeError), nothing written: taken, it left the event never to be recomputed."""
    # The event's count and first header only: its samples are read once, when it is whole (an
    # event of 4,096 chunks read them all again at each one).
    held, first = store.waveform_event(chunk.site, chunk.sensor, chunk.event_id)
    if first is not None:
        differs = disagreement(chunk.header(), json.loads(first))
        if differs is not None:
            raise DecodeError(differs[0], f"{differs[1]} (event {chunk.event_id})")
    appended = store.append_waveform(chunk, now)
    if not appended.stored or held + 1 < chunk.chunks:
        return Taken(appended)
    rows = store.waveform_chunks(chunk.site, chunk.sensor, chunk.event_id)
    recomputed = recompute(store, chunk.site, chunk.sensor, chunk.event_id, rows, now)
    if recomputed is None:
        return Taken(appended)
    found = compared(store, chunk.site, chunk.sensor, chunk.ts)
    return Taken(appended, recomputed, found, chunk.event_id)


def recompute(
    store: Store, site: str, sensor: str, event_id: str, rows: list[Any], now: datetime
) -> tuple[datetime, float] | None:
    """The daemon's summary of a whole event, journaled; None if its chunks do not join."""
    try:
        wave = join([(r["header"], bytes(r["samples"])) for r in rows])
    except ValueError as exc:
        log.warning("Seismograph %s event %r: waveforms not recomputed: %s", sensor, event_id, exc)
        return None
    summary = summarize(wave)
    ts = from_us(rows[0]["ts_us"])
    payload = {
        "event_id": event_id,
        "summary": summary.to_json(),
        "chunks": len(rows),
        "samples": int(wave.data.shape[1]),
    }
    edge = [
        r for r in store.seismic_between(site, ts, ts + timedelta(microseconds=1)) if r["sensor"] == sensor
    ]
    if edge:
        payload["edge_summary_ts_us"] = edge[0]["ts_us"]
    stored = store.append_seismic(site, sensor, "seismic-waveforms", ts, wave.duration_s, payload, now)
    if stored.conflict:
        log.warning("Seismograph %s event %r: %s", sensor, event_id, stored.conflict)
    return (ts, wave.duration_s) if stored.stored else None
