"""The chain kinds: for each, the record it is chained as and where it lives (one registry).

A chain entry is ``(site, seq, kind, key, digest, head)``: ``digest`` is SHA-256 of the
record's canonical JSON, ``head`` SHA-256(previous head + digest). Each kind has ONE function
building its record from a row (the store's append, the notices' and the evidence verifier
all call it) and, for the kinds an evidence bundle exports row by row, the SQL naming its
table, its chain key and what makes a row fall in a window. A module that chains a kind of
its own (notices) has it listed here, so that a bundle verifies those rows too.

Standard library only: the verifier a town runs imports it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from monitor.wire.canonical import canonical_json

GENESIS = "0" * 64
SOUND_FIELDS = ("LAeq", "LAFmax", "LASmax", "LAFmin", "LCeq", "LCpeak", "LZpeak", "LZeq")
# Each level's unit: its frequency weighting (the letter after L), for the headers readers see.
SOUND_UNITS = {name: f"dB({name[1]})" for name in SOUND_FIELDS}


def digest_of(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(record)).hexdigest()


def next_head(previous: str, digest: str) -> str:
    return hashlib.sha256((previous + digest).encode()).hexdigest()


# --------------------------------------------------------------------------- canonical records
# The dict each row is chained as: ONE function per chain kind, used by the appends
# (Store.chain_row, notices) and by monitor/evidence/verify.py, which rebuilds them from exported rows.
# REAL columns are passed through float(): SQLite hands back 55.0 for a stored 55,
# and the digest must not depend on whether a caller passed an int.


def _real(value: Any) -> float | None:
    return None if value is None else float(value)


def sound_record(row: Mapping[str, Any]) -> dict[str, Any]:
    record = {
        "t": "sound",
        "site": row["site"],
        "sensor": row["sensor"],
        "ts_us": row["ts_us"],
        "duration_s": _real(row["duration_s"]),
        **{k: _real(row[k]) for k in SOUND_FIELDS},
        "source": row["source"],
    }
    # A second the meter was overloaded in says so; every other record is exactly what it was
    # before the flag existed (absent, not false), so rows stored before it keep their digests.
    names = row.keys()  # a sqlite3.Row's `in` looks at values, not names
    if "overload" in names and row["overload"]:
        record["overload"] = True
    return record


def reading_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "reading",
        "site": row["site"],
        "sensor": row["sensor"],
        "kind": row["kind"],
        "ts_us": row["ts_us"],
        "duration_s": row["duration_s"],
        "data": row["data"],
    }


def event_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "event",
        "site": row["site"],
        "kind": row["kind"],
        "id": row["id"],
        "ts_us": row["ts_us"],
        "end_us": row["end_us"],
        "data": row["data"],
    }


def audio_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` holds the ``pcm`` bytes, or their ``pcm_sha256`` when the samples are not at hand."""
    names = row.keys()  # a sqlite3.Row's `in` looks at values, not names
    pcm_sha256 = row["pcm_sha256"] if "pcm_sha256" in names else hashlib.sha256(row["pcm"]).hexdigest()
    return {
        "t": "audio",
        "site": row["site"],
        "sensor": row["sensor"],
        "ts_us": row["ts_us"],
        "seq": row["seq"],
        "sample_rate": row["sample_rate"],
        "format": row["format"],
        "pcm_sha256": pcm_sha256,
    }


def waveform_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A seismograph waveform chunk: its header as stored and the SHA-256 of its samples."""
    names = row.keys()
    sha = row["samples_sha256"] if "samples_sha256" in names else hashlib.sha256(row["samples"]).hexdigest()
    return {
        "t": "waveform",
        "site": row["site"],
        "sensor": row["sensor"],
        "event_id": row["event_id"],
        "chunk": row["chunk"],
        "chunks": row["chunks"],
        "ts_us": row["ts_us"],
        "header": row["header"],
        "samples_sha256": sha,
    }


def finding_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "finding",
        "id": row["id"],
        "revision": row["revision"],
        "site": row["site"],
        "standard": row["standard"],
        "section": row["section"],
        "kind": row["kind"],
        "start_us": row["start_us"],
        "end_us": row["end_us"],
        "retracted": row["retracted"],
        "data": row["data"],
    }


def rejection_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "rejection",
        "id": row["id"],
        "site": row["site"],
        "topic": row["topic"],
        "reason": row["reason"],
        "excerpt": row["excerpt"],
        "received_us": row["received_us"],
    }


def portal_action_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "portal_action",
        "id": row["id"],
        "site": row["site"],
        "ts_us": row["ts_us"],
        "actor": row["actor"],
        "role": row["role"],
        "action": row["action"],
        "target": row["target"],
        "source": row["source"],
        "data": row["data"],
    }


def alert_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "alert",
        "id": row["id"],
        "site": row["site"],
        "audience": row["audience"],
        "kind": row["kind"],
        "severity": row["severity"],
        "condition": row["condition"],
        "message": row["message"],
        "data": row["data"],
        "created_us": row["created_us"],
    }


def health_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "health",
        "site": row["site"],
        "sensor": row["sensor"],
        "ts_us": row["ts_us"],
        "state": row["state"],
        "gap_s": _real(row["gap_s"]),
        "detail": row["detail"],
    }


def calibration_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "calibration",
        "site": row["site"],
        "sensor": row["sensor"],
        "ts_us": row["ts_us"],
        "reference_db": _real(row["reference_db"]),
        "measured_db": _real(row["measured_db"]),
        "drift_db": _real(row["drift_db"]),
        "flagged": int(row["flagged"]),
    }


def conflict_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A resend of a kept reading (``kind``: sound, audio or a reading kind) with other content."""
    return {
        "t": "conflict",
        "site": row["site"],
        "sensor": row["sensor"],
        "kind": row["kind"],
        "ts_us": row["ts_us"],
        "first_digest": row["first_digest"],
        "second_digest": row["second_digest"],
        "received_us": row["received_us"],
    }


def config_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration a site was judged under.

    Since evidence format 2: the profile's name and SHA-256, the SHA-256 of the
    configuration with secret values left out, and since when (the daemon's start).
    Stores written before hold ``{"sha256"}`` of the configuration file alone.
    """
    if "profile_sha256" not in row:
        return {"t": "config", "sha256": row["sha256"]}
    return {
        "t": "config",
        "profile": str(row["profile"]),
        "profile_sha256": str(row["profile_sha256"]),
        "config_sha256": str(row["config_sha256"]),
        "since_us": int(row["since_us"]),
    }


def config_key(row: Mapping[str, Any]) -> str:
    """Chain key of a config record: its whole content (the record has no table of its own)."""
    return f"{row['config_sha256']}|{row['profile_sha256']}|{int(row['since_us'])}|{row['profile']}"


def config_from_key(key: str) -> dict[str, Any]:
    """The fields of a config record from its chain key (either shape)."""
    parts = key.split("|", 3)
    if len(parts) != 4:
        return {"sha256": key}
    return {
        "config_sha256": parts[0],
        "profile_sha256": parts[1],
        "since_us": int(parts[2]),
        "profile": parts[3],
    }


# --------------------------------------------------------------------------- chained records
# The dicts each row is chained as; an evidence verifier rebuilds them from exported rows.


def notice_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "notice",
        "id": row["id"],
        "site": row["site"],
        "standard": row["standard"],
        "section": row["section"],
        "opened_us": row["opened_us"],
        "first_deadline_us": row["first_deadline_us"],
        "data": row["data"],
    }


def change_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "notice_change",
        "notice_id": row["notice_id"],
        "seq": row["seq"],
        "change": row["change"],
        "status": row["status"],
        "actor": row["actor"],
        "note": row["note"],
        "at_us": row["at_us"],
        "deadline_us": row["deadline_us"],
        "data": row["data"],
    }


def episode_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "notice_episode",
        "notice_id": row["notice_id"],
        "episode_id": row["episode_id"],
        "revision": row["revision"],
        "start_us": row["start_us"],
        "end_us": row["end_us"],
        "finding_ids": row["finding_ids"],
        "data": row["data"],
    }


def complaint_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A resident's complaint as received, with what the record said at once (``correlation``);
    the contact details only as their salted SHA-256 (the Town alone sees them, in the row)."""
    return {
        "t": "complaint",
        "id": row["id"],
        "site": row["site"],
        "received_us": row["received_us"],
        "what": row["what"],
        "start_us": row["start_us"],
        "end_us": row["end_us"],
        "address": row["address"],
        "plan_x": _real(row["plan_x"]),
        "plan_y": _real(row["plan_y"]),
        "description": row["description"],
        "contact_sha256": row["contact_sha256"],
        "correlation": row["correlation"],
        # The point clicked on the site plan (WGS84), only when given: older records read alike.
        **{k: v for k in ("lat", "lon") if (v := _real(_column(row, k))) is not None},
    }


def _column(row: Mapping[str, Any], name: str) -> Any:
    """``row[name]``, or None for a row of a store (or bundle) from before the column existed."""
    try:
        return row[name]
    except (KeyError, IndexError):
        return None


def complaint_change_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "t": "complaint_change",
        "complaint_id": row["complaint_id"],
        "seq": row["seq"],
        "change": row["change"],
        "status": row["status"],
        "actor": row["actor"],
        "note": row["note"],
        "at_us": row["at_us"],
        "notice_id": row["notice_id"],
        "data": row["data"],
    }


def report_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A compliance report sent: its period, the chain head it was computed from, its files' SHA-256."""
    return {
        "t": "report",
        "id": row["id"],
        "site": row["site"],
        "period_start_us": row["period_start_us"],
        "period_end_us": row["period_end_us"],
        "made_us": row["made_us"],
        "chain_seq": row["chain_seq"],
        "chain_head": row["chain_head"],
        "pdf_sha256": row["pdf_sha256"],
        "csv_sha256": row["csv_sha256"],
        "recipients": row["recipients"],
    }


Record = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ChainKind:
    """A chain kind: ``record`` builds what is hashed, ``columns`` name the row's chain key
    (joined with '|'; ``key_of`` in Python, ``key`` in SQL over the row ``t``: the one
    definition both are made from). ``file`` is set for the kinds exported row by row to
    records/<name>.json: ``source`` is their FROM clause, ``site`` the column holding the
    site and ``window`` what makes a row belong to [:from, :to), bracketed. Sound, readings and audio
    go to CSV (or stay chain links) and config records to records/config.json, each by its
    own code in the exporter.

    ``optional``: a bundle holds the kind's file only when its segment chains such records (a
    bundle made before the kind existed is complete without it). ``blob``: a BLOB column the
    record holds as its SHA-256 (``<blob>_sha256``), which a bundle carries as base64
    (``<blob>_base64``) so that verify hashes the bytes themselves (``bundle_row``,
    ``stored_row``).
    """

    name: str
    record: Record
    columns: tuple[str, ...] = ()
    file: str = ""
    source: str = ""
    window: str = ""
    site: str = "t.site"
    optional: bool = False
    blob: str = ""

    def key_of(self, row: Mapping[str, Any]) -> str:
        if self.name == "config":
            return config_key(row)
        return "|".join(str(row[c]) for c in self.columns)

    @property
    def key(self) -> str:
        if len(self.columns) == 1:
            return f"CAST(t.{self.columns[0]} AS TEXT)"
        return " || '|' || ".join(f"t.{c}" for c in self.columns)

    def bundle_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """What a bundle carries of a stored row: its record without ``t``, a BLOB as base64."""
        chained = self.record(row)
        chained.pop("t")
        if self.blob:
            chained.pop(f"{self.blob}_sha256")
            chained[f"{self.blob}_base64"] = base64.b64encode(bytes(row[self.blob])).decode("ascii")
        return chained

    def stored_row(self, carried: Mapping[str, Any]) -> dict[str, Any]:
        """The row ``bundle_row`` carried, as ``record`` takes it (ValueError: not base64)."""
        if not self.blob:
            return dict(carried)
        row = {k: v for k, v in carried.items() if k != f"{self.blob}_base64"}
        text = carried[f"{self.blob}_base64"]
        if not isinstance(text, str):
            raise ValueError(f"{self.blob}_base64 is not a string")
        row[self.blob] = base64.b64decode(text, validate=True)
        return row


def _exported(
    name: str,
    record: Record,
    columns: tuple[str, ...],
    source: str,
    window: str,
    site: str = "t.site",
    *,
    optional: bool = False,
    blob: str = "",
) -> ChainKind:
    file = f"records/{source.split()[0]}.json"
    # Bracketed once here: every query joins it to others with AND, and an OR inside it would
    # otherwise take in other sites' rows.
    return ChainKind(name, record, columns, file, source, f"({window})", site, optional, blob)


KINDS: dict[str, ChainKind] = {
    kind.name: kind
    for kind in (
        ChainKind("sound", sound_record, ("sensor", "ts_us")),
        ChainKind("reading", reading_record, ("sensor", "kind", "ts_us")),
        ChainKind("audio", audio_record, ("sensor", "ts_us")),
        # monitor/daemon/seismic_intake.py: a seismograph event's waveforms, chunk by chunk as they
        # arrived, the samples in the bundle (base64) so that verify hashes them (issue 27)
        _exported(
            "waveform",
            waveform_record,
            ("sensor", "event_id", "chunk"),
            "waveforms t",
            "t.ts_us >= :from AND t.ts_us < :to",
            optional=True,
            blob="samples",
        ),
        _exported(
            "event",
            event_record,
            ("kind", "id"),
            "events t",
            "t.ts_us < :to AND COALESCE(t.end_us, t.ts_us) >= :from",
        ),
        _exported(
            "finding",
            finding_record,
            ("id", "revision"),
            "findings t",
            "t.start_us < :to AND t.end_us >= :from",
        ),
        _exported("alert", alert_record, ("id",), "alerts t", "t.created_us >= :from AND t.created_us < :to"),
        _exported(
            "health",
            health_record,
            ("sensor", "ts_us", "state"),
            "health t",
            "t.ts_us >= :from AND t.ts_us < :to",
        ),
        _exported(
            "calibration",
            calibration_record,
            ("sensor", "ts_us"),
            "calibration t",
            "t.ts_us >= :from AND t.ts_us < :to",
        ),
        _exported(
            "rejection",
            rejection_record,
            ("id",),
            "rejections t",
            "t.received_us >= :from AND t.received_us < :to",
        ),
        # a reading resent with other content: the kept one's and the resend's digests
        _exported(
            "conflict",
            conflict_record,
            ("sensor", "kind", "ts_us", "second_digest"),
            "conflicts t",
            "t.ts_us >= :from AND t.ts_us < :to",
        ),
        # monitor/portal: what a person did through the web portal (who, what, when, from where)
        _exported(
            "portal_action",
            portal_action_record,
            ("id",),
            "portal_actions t",
            "t.ts_us >= :from AND t.ts_us < :to",
            optional=True,
        ),
        # monitor/notify/notices.py: a notice, its change history and the episodes it cites
        _exported(
            "notice", notice_record, ("id",), "notices t", "t.opened_us < :to AND t.updated_us >= :from"
        ),
        _exported(
            "notice_change",
            change_record,
            ("notice_id", "seq"),
            "notice_changes t JOIN notices n ON n.id = t.notice_id",
            "t.at_us >= :from AND t.at_us < :to",
            "n.site",
        ),
        _exported(
            "notice_episode",
            episode_record,
            ("notice_id", "episode_id", "revision"),
            "notice_episodes t JOIN notices n ON n.id = t.notice_id",
            "t.start_us < :to AND t.end_us >= :from",
            "n.site",
        ),
        # monitor/complaints: a resident's complaint, the Town's triage of it, and reports sent
        _exported(
            "complaint",
            complaint_record,
            ("id",),
            "complaints t",
            "(t.start_us < :to AND t.end_us >= :from) OR (t.received_us >= :from AND t.received_us < :to)",
            optional=True,
        ),
        _exported(
            "complaint_change",
            complaint_change_record,
            ("complaint_id", "seq"),
            "complaint_changes t JOIN complaints n ON n.id = t.complaint_id",
            "t.at_us >= :from AND t.at_us < :to",
            "n.site",
            optional=True,
        ),
        _exported(
            "report",
            report_record,
            ("id",),
            "reports t",
            "t.period_start_us < :to AND t.period_end_us > :from",
            optional=True,
        ),
        ChainKind("config", config_record, file="records/config.json"),
    )
}
