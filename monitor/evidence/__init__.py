"""Evidence for inspectors: export a window of the record as a self-verifying zip, and verify one.

    store (SQLite + hash chain) ──► export_bundle ──► bundle.zip
        data/sound/part-NNNNN.csv, data/<light|weather|turbidity|status>.csv
                          per-second rows of the window, in chain order, floats as repr()
        records/<kind>.json events, findings (all revisions), alerts, health, calibration,
                          rejections: those of the window the reader may see (``Disclosure``);
                          config: every one whose chain entry lies in the segment
        chain.csv         the chain segment: seq, kind, key, digest, recorded_us; no heads
                          (verify recomputes them), for a sound row in the bundle only a tag
                          of its digest, for a record not disclosed its digest alone (format 4;
                          see docs/EVIDENCE.md)
        anchors.json      every chain head the daemon published for the site
        records/notice*.json  notices, their change history and the episodes they cite
        plots/, profile/<name>.toml, README.txt
        config.toml       the site's settings the findings depend on, by allow-list (disclosure.py)
        manifest.json     SHA-256 of every file, the scope, the segment's ends, the anchors
    InfluxDB ──► data/<measurement>_influxdb.csv   the part of the window pruned locally;
                                                   outside the chain, said so in the manifest

    bundle.zip [+ anchors the town holds] ──► verify_bundle ──► Report

Verification rebuilds every exported row's canonical record with the store's own
functions (``monitor.journal.chain_kinds.KINDS``), hashes it and matches it to the chain entry
the row names (``chain_seq``), walking the chain once in order. The manifest is
checked, not trusted: the files a bundle may hold are fixed by the format and the
rows, config.toml and the profile by the chain's config record. The chain itself
could be rewritten end to end by whoever holds the store: only heads held by the
town (``--anchors``) tell such a rewrite apart from the original, and a head proves
the entries up to it and nothing after it, so the report's first line says how far
the town's heads reach (``Report.verdict``).

Everything streams: rows go from SQLite cursors into the zip members and are
hashed on the way, and verification reads them back the same way, so a month of
per-second data never sits in memory.

The package: ``format`` (files, columns, record kinds, anchors, verify's limits), ``disclosure``
(what a bundle shows: the configuration's allow-list, the reader's records), ``export`` (store ->
bundle), ``verify`` (bundle -> report), ``parts`` (format 3's sound parts, checked by worker
processes) and ``progress`` (the progress line on a terminal). The InfluxDB reader for pruned windows is in
monitor/influx/client.py beside the writer; the plots are drawn by monitor/notify/plots.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor.evidence.format import (
    FORMAT,
    Anchor,
    EvidenceError,
    TimeFormat,
    exported_window,
    load_anchors,
)
from monitor.evidence.verify import Problem, Report, verify_bundle

if TYPE_CHECKING:
    from monitor.evidence.export import ExportSummary, export_bundle

_EXPORT = frozenset({"ExportSummary", "export_bundle"})


def __getattr__(name: str) -> Any:
    # The exporter (SQLite, InfluxDB client, plots) is imported on first use, so that
    # ``monitor.evidence.verify`` stays free of what a town's verifier does not need.
    if name in _EXPORT:
        from monitor.evidence import export

        return getattr(export, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMAT",
    "Anchor",
    "EvidenceError",
    "ExportSummary",
    "Problem",
    "Report",
    "TimeFormat",
    "export_bundle",
    "exported_window",
    "load_anchors",
    "verify_bundle",
]
