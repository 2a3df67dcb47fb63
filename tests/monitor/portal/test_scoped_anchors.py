"""The chain heads published to the Town, as a time-scoped inspector may see and verify against them.

The probe: an inspector scoped to 20:00-21:00Z on 2026-12-03, verifying against "the heads this
installation published", was held against every anchor of the site, so the verify page told it
how many heads were published after its scope ("town-held anchors outside the segment ... 2"),
and its bundle's anchors.json listed each later head with its seq and publication time. It may use
those published within its scope and the first one after its end (which closes a bundle of its
last minutes, TimeScope.anchors); the Town's account verifies against all of them, as before.
"""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.config import parse_config
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from rules.model import Finding, FindingKind, Measurement
from tests.support.config_samples import MINIMAL

CHICAGO = ZoneInfo("America/Chicago")
NOT_BEFORE = datetime(2026, 12, 3, 20, tzinfo=UTC)
NOT_AFTER = datetime(2026, 12, 3, 21, tzinfo=UTC)


def _finding(at: datetime, value: float) -> Finding:
    iso = at.isoformat().replace("+00:00", "Z")
    return Finding(
        site="s1",
        standard="noise",
        section="6.D",
        kind=FindingKind.VIOLATION,
        start=at,
        end=at + timedelta(minutes=1),
        timezone="America/Chicago",
        summary=f"averaged {value} dB(A)",
        sensors=("n1",),
        measurements=(Measurement("LAeq_60s", value, 65.0, "dB(A)"),),
        refs=(f"sound:n1:{iso}",),
        details={},
    )


def _setup(tmp_path: Path) -> tuple[Portal, Scope, Scope, dict[str, tuple[int, str]]]:
    db = tmp_path / "p.db"
    config = parse_config(f'[storage]\npath = "{db}"\n' + MINIMAL)
    heads = _fill(db)
    portal = Portal(config, clock=lambda: datetime(2026, 12, 10, tzinfo=UTC))
    scoped = Scope(User("ida", "inspector", (), NOT_BEFORE, NOT_AFTER), config)
    town = Scope(User("bob", "town", ()), config)
    return portal, scoped, town, heads


def _fill(db: Path) -> dict[str, tuple[int, str]]:
    """A finding in the scope and three after it, each followed by a published head: one inside
    the scope (20:45), the first after it (21:15) and two later ones (22:45, 23:45)."""
    store = Store(str(db))
    heads: dict[str, tuple[int, str]] = {}
    for name, found, published in (
        ("inside", NOT_BEFORE + timedelta(minutes=30), NOT_BEFORE + timedelta(minutes=45)),
        ("closing", NOT_AFTER + timedelta(minutes=5), NOT_AFTER + timedelta(minutes=15)),
        ("later", NOT_AFTER + timedelta(minutes=90), NOT_AFTER + timedelta(minutes=105)),
        ("latest", NOT_AFTER + timedelta(minutes=150), NOT_AFTER + timedelta(minutes=165)),
    ):
        with store.batch():
            store.append_finding(_finding(found, 80.0), found + timedelta(minutes=2))
        seq, head = queries.chain_head(store.conn, "s1")  # chained as the batch ends
        with store.batch():
            store.record_anchor("s1", seq, head, published)
        heads[name] = (seq, head)
    store.close()
    return heads


def _window() -> tuple[datetime, datetime]:
    return datetime(2026, 12, 3, 14, tzinfo=CHICAGO), datetime(2026, 12, 3, 16, tzinfo=CHICAGO)


def test_a_scoped_inspector_is_held_against_no_head_published_after_its_scope_closed(tmp_path: Path) -> None:
    portal, scoped, town, heads = _setup(tmp_path)
    later = {heads["later"], heads["latest"]}
    held = portal.published_anchors(scoped, "s1")
    assert [(a.seq, a.head) for a in held] == [heads["inside"], heads["closing"]]
    assert not later & {(a.seq, a.head) for a in held}
    assert [(a.seq, a.head) for a in portal.published_anchors(town, "s1")] == list(heads.values())

    out = tmp_path / "scoped.zip"
    portal.export(scoped, "s1", *_window(), out)
    report = portal.verify(out, None, held, name="scoped.zip")
    # Anchored as before: the segment ends at the first head published after the scope.
    assert report["ok"] and report["anchored"], report["lines"]
    said = "\n".join(report["lines"])
    assert "outside the segment" not in said, said  # no count of the heads published later
    for seq, head in later:
        assert f"seq {seq}" not in said and head not in said


def test_a_scoped_bundle_lists_no_head_published_after_its_scope(tmp_path: Path) -> None:
    portal, scoped, town, heads = _setup(tmp_path)
    out = tmp_path / "scoped.zip"
    portal.export(scoped, "s1", *_window(), out)
    with zipfile.ZipFile(out) as zf:
        listed = json.loads(zf.read("anchors.json"))
        manifest = json.loads(zf.read("manifest.json"))
        everything = b"".join(zf.read(n) for n in zf.namelist())
    assert [(a["seq"], a["head"]) for a in listed] == [heads["inside"], heads["closing"]]
    for _, head in (heads["later"], heads["latest"]):
        assert head.encode() not in everything
    assert (
        "anchors.json lists the chain heads published within the scope"
        in (manifest["disclosure"]["time_scope"]["rule"])
    )
    # The Town's bundle of the same window lists every head, and verifies anchored against them.
    whole = tmp_path / "town.zip"
    portal.export(town, "s1", *_window(), whole)
    with zipfile.ZipFile(whole) as zf:
        assert [(a["seq"], a["head"]) for a in json.loads(zf.read("anchors.json"))] == list(heads.values())
    report = portal.verify(whole, None, portal.published_anchors(town, "s1"))
    assert report["ok"] and report["anchored"], report["lines"]
    assert report["anchors_given"]


def test_the_verify_page_tells_a_scoped_inspector_nothing_of_later_heads(tmp_path: Path) -> None:
    """The evidence page's verify against the published heads, through `minewatch serve`: the
    scoped inspector's answer is anchored and names no later head; the Town's, of the same
    bundle, counts the two later heads as it did."""
    from monitor.config import load_config
    from tests.monitor.portal.test_request_limits import multipart
    from tests.support.portal_server import Client, serving
    from tests.support.portal_server import Portal as Harness

    scope = 'not_before = "2026-12-03T20:00:00Z"\nnot_after = "2026-12-03T21:00:00Z"\n'
    harness = Harness(
        tmp_path,
        accounts={"ida": ("inspector", '["s1"]'), "bob": ("town", "[]")},
        account_extra={"ida": scope},
    )
    heads = _fill(harness.store)
    config = load_config(harness.write())
    scoped = Scope(User("ida", "inspector", ("s1",), NOT_BEFORE, NOT_AFTER), config)
    bundle = tmp_path / "scoped.zip"
    Portal(config, clock=lambda: datetime(2026, 12, 10, tzinfo=UTC)).export(scoped, "s1", *_window(), bundle)

    def verified(name: str) -> str:
        client = Client(portal)
        assert client.login(name).status == 303
        head, tail = multipart(
            "b0undary", [("csrf", client.csrf("/sites/s1/evidence"))], ("bundle", "scoped.zip")
        )
        against = b'\r\n--b0undary\r\nContent-Disposition: form-data; name="against"\r\n\r\npublished'
        body = head + bundle.read_bytes() + against + tail
        reply = client.request(
            "POST",
            "/sites/s1/evidence/verify",
            headers={"Content-Type": "multipart/form-data; boundary=b0undary"},
            body=body,
        )
        assert reply.status == 200, reply.body[-2000:]
        return reply.body

    with serving(harness) as portal:
        page = verified("ida")
        assert "scoped.zip: OK, anchored" in page, page[-3000:]
        assert "outside the segment" not in page
        for seq, head in (heads["later"], heads["latest"]):
            assert f"seq {seq}" not in page and head not in page
        town = verified("bob")
        assert "scoped.zip: OK, anchored" in town
        assert "town-held anchors outside the segment, not checkable here: 2" in town
