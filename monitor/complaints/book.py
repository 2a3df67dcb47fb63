"""Complaints as stored: received, chained, triaged by the Town, attached to notices.

Tables ``complaints`` (what the resident said, the contact details, what the record said at
once, the current status) and ``complaint_changes`` (append-only: received, status changes
with the Town's note and who, notes, attachments to a notice). Every row is chained
(``complaint``, ``complaint_change`` in monitor/journal/chain_kinds.py), so an evidence bundle
proves when a complaint came and what was done with it. The contact details are never
chained in clear: the record holds their SHA-256 with a random salt kept in the row, so a
bundle (which any reader may hold) does not disclose them and the Town can still prove them.

Statuses: ``new`` (received) -> ``investigating`` -> ``corroborated`` | ``unfounded`` ->
``closed``; the Town may set any of them, each change with its note and who.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.errors import MinewatchError
from monitor.journal.store import Store
from monitor.wire.canonical import canonical_text, from_us, to_us

STATUSES = ("new", "investigating", "corroborated", "unfounded", "closed")
STATUS_LABELS = {
    "new": "new",
    "investigating": "investigating",
    "corroborated": "corroborated",
    "unfounded": "unfounded",
    "closed": "closed",
}
# Field limits: the public form states them and the portal refuses more (one line each).
MAX_ADDRESS = 200
MAX_DESCRIPTION = 4000
MAX_NAME = 100
MAX_EMAIL = 200
MAX_PHONE = 40
MAX_NOTE = 2000
CONTACT_FIELDS = ("name", "email", "phone")


class ComplaintError(MinewatchError):
    """A change the complaint's state or the record does not allow (said to the user)."""


class UnknownComplaint(ComplaintError):
    pass


@dataclass(frozen=True, slots=True)
class Complaint:
    id: str
    site: str
    received: datetime
    what: str
    start: datetime
    end: datetime
    address: str
    plan: tuple[float, float] | None  # metres typed on the operator's plan (older complaints)
    position: tuple[float, float] | None  # (latitude, longitude) clicked on the site plan
    description: str
    contact: Mapping[str, str]  # the Town's eyes only: the portal's allow-lists leave it out elsewhere
    correlation: Mapping[str, Any]  # what the record said at once (monitor/complaints/check.py)
    status: str
    updated: datetime
    notices: tuple[str, ...]  # the notices it was attached to


@dataclass(frozen=True, slots=True)
class ComplaintChange:
    complaint_id: str
    seq: int
    change: str
    status: str
    actor: str
    note: str
    at: datetime
    notice_id: str
    data: Mapping[str, Any]


def new_reference() -> str:
    """'C-7K3M-Q9TX': 40 random bits, in letters and digits a person can read out on the phone."""
    text = base64.b32encode(secrets.token_bytes(5)).decode()
    return f"C-{text[:4]}-{text[4:]}"


def contact_digest(contact: Mapping[str, str], salt: str) -> str:
    return hashlib.sha256((salt + canonical_text(dict(contact))).encode()).hexdigest()


class ComplaintBook:
    """The complaints of every site over a Store (the one writer of the chain)."""

    def __init__(self, store: Store) -> None:
        self._store: Store | None = store
        self.conn = store.conn

    @classmethod
    def reader(cls, conn: sqlite3.Connection) -> ComplaintBook:
        """Reads only, over a bare connection (a report's): no Store, so no writes."""
        book = cls.__new__(cls)
        book._store = None
        book.conn = conn
        if conn.row_factory is not sqlite3.Row:
            conn.row_factory = sqlite3.Row
        return book

    @property
    def store(self) -> Store:
        if self._store is None:
            raise ComplaintError("a reader's ComplaintBook writes nothing")
        return self._store

    # ------------------------------------------------------------------ reading

    def _canonical_id(self, complaint_id: str) -> str:
        text = complaint_id.strip().upper()
        row = self.conn.execute("SELECT id FROM complaints WHERE id = ?", (text,)).fetchone()
        if row is None:
            raise UnknownComplaint(f"no complaint {complaint_id!r}")
        return str(row[0])

    def get(self, complaint_id: str) -> Complaint:
        row = self.conn.execute(
            "SELECT * FROM complaints WHERE id = ?", (self._canonical_id(complaint_id),)
        ).fetchone()
        return self._complaint(row)

    def find(self, site: str, start: datetime | None = None, end: datetime | None = None) -> list[Complaint]:
        """The site's complaints (those whose time overlaps [start, end) when given), by time."""
        query = "SELECT * FROM complaints WHERE site = ?"
        params: list[Any] = [site]
        if start is not None and end is not None:
            query += " AND start_us < ? AND end_us >= ?"
            params += [to_us(end), to_us(start)]
        rows = self.conn.execute(query + " ORDER BY start_us, id", params).fetchall()
        return [self._complaint(r) for r in rows]

    def for_notice(self, notice_id: str) -> list[Complaint]:
        """The complaints attached to a notice, the ones it answers."""
        rows = self.conn.execute(
            "SELECT DISTINCT complaint_id FROM complaint_changes WHERE notice_id = ? AND change = 'attached'"
            " ORDER BY complaint_id",
            (notice_id,),
        ).fetchall()
        return [self.get(str(r[0])) for r in rows]

    def history(self, complaint_id: str) -> list[ComplaintChange]:
        rows = self.conn.execute(
            "SELECT * FROM complaint_changes WHERE complaint_id = ? ORDER BY seq",
            (self._canonical_id(complaint_id),),
        ).fetchall()
        return [
            ComplaintChange(
                r["complaint_id"],
                r["seq"],
                r["change"],
                r["status"],
                r["actor"],
                r["note"],
                from_us(r["at_us"]),
                r["notice_id"],
                json.loads(r["data"]),
            )
            for r in rows
        ]

    def _complaint(self, row: sqlite3.Row) -> Complaint:
        notices = tuple(
            str(r[0])
            for r in self.conn.execute(
                "SELECT DISTINCT notice_id FROM complaint_changes WHERE complaint_id = ?"
                " AND change = 'attached' ORDER BY notice_id",
                (row["id"],),
            )
        )
        plan = None if row["plan_x"] is None else (float(row["plan_x"]), float(row["plan_y"]))
        position = None if row["lat"] is None else (float(row["lat"]), float(row["lon"]))
        return Complaint(
            id=row["id"],
            site=row["site"],
            received=from_us(row["received_us"]),
            what=row["what"],
            start=from_us(row["start_us"]),
            end=from_us(row["end_us"]),
            address=row["address"],
            plan=plan,
            position=position,
            description=row["description"],
            contact=json.loads(row["contact"]),
            correlation=json.loads(row["correlation"]),
            status=row["status"],
            updated=from_us(row["updated_us"]),
            notices=notices,
        )

    # ------------------------------------------------------------------ writing (inside a store batch)

    def submit(
        self,
        site: str,
        what: str,
        start: datetime,
        end: datetime,
        address: str,
        plan: tuple[float, float] | None,
        description: str,
        contact: Mapping[str, str],
        correlation: Mapping[str, Any],
        now: datetime,
        position: tuple[float, float] | None = None,
    ) -> Complaint:
        """Store and chain a complaint with its first change ('received'); returns it."""
        salt = secrets.token_hex(16)
        kept = {k: v for k, v in contact.items() if k in CONTACT_FIELDS and v}
        for _ in range(5):  # 40 random bits: a clash is rare; never reuse a reference
            reference = new_reference()
            if self.conn.execute("SELECT 1 FROM complaints WHERE id = ?", (reference,)).fetchone() is None:
                break
        row = {
            "id": reference,
            "site": site,
            "received_us": to_us(now),
            "what": what,
            "start_us": to_us(start),
            "end_us": to_us(end),
            "address": address,
            "plan_x": None if plan is None else float(plan[0]),
            "plan_y": None if plan is None else float(plan[1]),
            "description": description,
            "contact": canonical_text(kept),
            "contact_salt": salt,
            "contact_sha256": contact_digest(kept, salt),
            "correlation": canonical_text(dict(correlation)),
            "status": "new",
            "updated_us": to_us(now),
        }
        if position is not None:  # the chained record names them only when given (chain_kinds.py)
            row["lat"], row["lon"] = float(position[0]), float(position[1])
        self.conn.execute(
            f"INSERT INTO complaints ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self.store.chain_row(site, "complaint", row, now)
        self._change(site, reference, "received", "new", "resident", "", now)
        return self.get(reference)

    def triage(self, complaint_id: str, status: str, note: str, actor: str, now: datetime) -> Complaint:
        if status not in STATUSES:
            raise ComplaintError(f"status: one of {', '.join(STATUSES)}, got {status!r}")
        complaint = self.get(complaint_id)
        self._change(complaint.site, complaint.id, "status", status, actor, note, now)
        self.conn.execute(
            "UPDATE complaints SET status = ?, updated_us = ? WHERE id = ?",
            (status, to_us(now), complaint.id),
        )
        return self.get(complaint.id)

    def attach(self, complaint_id: str, notice_id: str, actor: str, note: str, now: datetime) -> Complaint:
        """Attach the complaint to a notice of the same site: the notice answers it."""
        from monitor.notify.notices import UnknownNotice, get_notice

        complaint = self.get(complaint_id)
        # Another site's notice is answered as one that does not exist: a Town account scoped
        # to this site must not learn which notice numbers exist elsewhere.
        unknown = ComplaintError(f"notice: no notice {notice_id!r} of site {complaint.site}")
        try:
            notice = get_notice(self.conn, notice_id)
        except UnknownNotice:
            raise unknown from None
        if notice.site != complaint.site:
            raise unknown
        if notice.id in complaint.notices:
            raise ComplaintError(f"notice: the complaint is attached to {notice.id} already")
        self._change(complaint.site, complaint.id, "attached", complaint.status, actor, note, now, notice.id)
        self.conn.execute("UPDATE complaints SET updated_us = ? WHERE id = ?", (to_us(now), complaint.id))
        return self.get(complaint.id)

    def _change(
        self,
        site: str,
        complaint_id: str,
        change: str,
        status: str,
        actor: str,
        note: str,
        now: datetime,
        notice_id: str = "",
        data: Mapping[str, Any] | None = None,
    ) -> None:
        seq = int(
            self.conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM complaint_changes WHERE complaint_id = ?",
                (complaint_id,),
            ).fetchone()[0]
        )
        row = {
            "complaint_id": complaint_id,
            "seq": seq,
            "change": change,
            "status": status,
            "actor": actor,
            "note": note,
            "at_us": to_us(now),
            "notice_id": notice_id,
            "data": canonical_text(dict(data or {})),
        }
        self.conn.execute(
            f"INSERT INTO complaint_changes ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self.store.chain_row(site, "complaint_change", row, now)
