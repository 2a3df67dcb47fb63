"""Failed and throttled logins, CSRF refusals and logouts are portal action records; a flood is
summarised into a few records that carry its count."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from monitor.evidence.format import exported_window
from monitor.portal.security import ANY, INTERVAL_S, KEYS_PER_KIND, Event, Summary
from tests.support.portal_server import Client, Portal, serving


def test_a_flood_of_failed_logins_is_a_few_records_carrying_its_count(tmp_path: Path) -> None:
    portal = Portal(tmp_path)
    with serving(portal):
        bob = Client(portal)  # a town account of every site
        token = bob.csrf()
        statuses = [
            bob.request("POST", "/login", {"name": "bob", "password": "guess", "csrf": token}).status
            for _ in range(1000)
        ]
        # Five free failures, then waits: the first is 10 s, so a slow machine may see one
        # or two more 401s as each wait ends, never more (the waits double).
        assert statuses[:6] == [401] * 5 + [429] and statuses.count(429) >= 993
        stranger = Client(portal, source="127.0.0.3")
        token = stranger.csrf()
        for i in range(200):  # names nobody has, from one address
            stranger.request("POST", "/login", {"name": f"guess{i}", "password": "x", "csrf": token})
        # A form without its token, from a logged-in account and from nobody.
        ann = Client(portal)
        assert ann.login("ann").status == 303
        assert ann.request("POST", "/logout", {"csrf": "forged"}).status == 403
        assert Client(portal).request("POST", "/login", {"name": "ann", "password": "x"}).status == 403
    # Stopped: what was only counted is written too.
    for site in ("s1", "s2"):
        failed = [r for r in portal.actions("login_failed") if r["site"] == site]
        throttled = [r for r in portal.actions("login_throttled") if r["site"] == site]
        bobs = [r for r in failed + throttled if r["actor"] == "bob"]
        assert len(bobs) <= 4 and sum(r["data"]["count"] for r in bobs) == 1000
        assert {(r["role"], r["target"], r["source"]) for r in bobs} == {("town", "bob", "127.0.0.1")}
        strangers = [r for r in failed + throttled if r["actor"] == ""]
        assert len(strangers) <= 4 and sum(r["data"]["count"] for r in strangers) == 200
        assert {(r["target"], r["source"]) for r in strangers} == {("unknown account", "127.0.0.3")}
        assert not any("guess" in str(r) for r in strangers)  # the names typed are not kept
    csrf = portal.actions("csrf_refused")
    assert {(r["site"], r["actor"]) for r in csrf} == {("s1", "ann"), ("s1", ""), ("s2", "")}
    first = portal.actions("login_failed")[0]["data"]
    assert first["count"] == 1 and first["first"] == first["last"] and first["first"].endswith("Z")


def test_many_names_and_addresses_at_once_fold_into_one_key_per_kind() -> None:
    summary = Summary(("s1", "s2"))
    written = []
    for i in range(1000):
        event = Event("login_failed", "", "", "unknown account", f"198.51.{i >> 8}.{i & 255}", ("s1", "s2"))
        written += summary.note(event, now=i * 0.01)
    assert len(written) == KEYS_PER_KIND + 1 and len(summary) == KEYS_PER_KIND + 1
    assert (written[-1].event.address, written[-1].event.target) == (ANY, ANY)
    later = summary.due(INTERVAL_S + 10)  # each key once a minute at most
    assert len(later) == 1 and later[0].count == 1000 - KEYS_PER_KIND - 1
    assert sum(r.count for r in written + later) == 1000
    assert summary.due(2 * INTERVAL_S + 20) == [] and len(summary) == 0  # quiet keys forgotten


def test_a_verify_upload_and_a_bundle_prepared_are_action_records(tmp_path: Path) -> None:
    with serving(Portal(tmp_path)) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        token = bob.csrf("/sites/s1/evidence")
        boundary = "minewatch-test-boundary"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{token}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; filename="b.zip"\r\n'
            f"Content-Type: application/zip\r\n\r\nnot a zip\r\n--{boundary}--\r\n"
        )
        verified = bob.request(
            "POST",
            "/sites/s1/evidence/verify",
            body=body.encode(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert verified.status == 200, verified.body
        form = {"from": "2026-01-05T08:00", "to": "2026-01-05T09:00", "csrf": token}
        assert bob.request("POST", "/sites/s1/evidence/bundle", form).status == 303
    (check,) = portal.actions("bundle_verified")
    assert (check["actor"], check["site"], check["target"]) == ("bob", "s1", "b.zip")
    assert check["data"]["ok"] is False and check["data"]["problems"] >= 1
    (prepared,) = portal.actions("bundle_prepared")
    assert prepared["actor"] == "bob" and prepared["data"] == {
        "from": "2026-01-05T14:00:00+00:00",
        "to": "2026-01-05T15:00:00+00:00",
    }


def test_a_scoped_inspectors_download_records_the_window_exported_not_the_one_asked(tmp_path: Path) -> None:
    """Issue 24: an inspector limited to 08:00-09:00 site time (14:00-15:00Z) asks for
    06:00-12:00; the bundle covers the scope only, and the bundle_downloaded record says so
    (bundle_prepared keeps what was asked)."""
    portal = Portal(tmp_path)
    portal.accounts["ida"] = ("inspector", '["s1"]')
    portal.account_extra["ida"] = 'not_before = "2026-01-05T14:00:00Z"\nnot_after = "2026-01-05T15:00:00Z"\n'
    with serving(portal):
        ida = Client(portal)
        assert ida.login("ida").status == 303
        form = {"from": "2026-01-05T06:00", "to": "2026-01-05T12:00", "csrf": ida.csrf("/sites/s1/evidence")}
        job = ida.request("POST", "/sites/s1/evidence/bundle", form).location
        for _ in range(100):
            page = ida.get(job)
            link = re.search(r'href="(/sites/s1/evidence/jobs/[^"]+\.zip)"', page.body)
            if link or "could not be prepared" in page.body:
                break
            time.sleep(0.2)
        assert link, page.body
        download = ida.get(link.group(1))
        assert download.status == 200
        bundle = tmp_path / "b.zip"
        bundle.write_bytes(download.raw)
    (prepared,) = portal.actions("bundle_prepared")
    assert prepared["data"]["from"].startswith("2026-01-05T12:00")  # asked: 06:00 CST
    (downloaded,) = portal.actions("bundle_downloaded")
    assert downloaded["actor"] == "ida"
    assert downloaded["data"]["from"] == exported_window(bundle)["from"]
    assert downloaded["data"]["to"] == exported_window(bundle)["to"]
    assert downloaded["data"]["from"].startswith("2026-01-05T14:00")  # 08:00 CST, the scope
    assert downloaded["data"]["to"].startswith("2026-01-05T15:00")
    # The job's page says the bundle's window as its manifest does: the scope held to its end,
    # a microsecond past not_after (it said the window asked for alone, to the minute).
    said = re.search(r"id=\"job-window\">The bundle's window: (\S+) to (\S+) ", page.body)
    assert said, page.body
    assert said.groups() == (exported_window(bundle)["from"], exported_window(bundle)["to"])
    assert said.group(2) == "2026-01-05T15:00:00.000001Z"


def test_the_operator_sees_its_own_accounts_actions_only(tmp_path: Path) -> None:
    """Disclosure by allow-list: the operator's actions API lists what operator accounts did,
    not the Town's logins and addresses, nor failed logins of unknown names."""
    portal = Portal(tmp_path)
    with serving(portal):
        assert Client(portal, source="127.0.0.7").login("bob").status == 303  # the Town
        stranger = Client(portal, source="127.0.0.9")
        token = stranger.csrf()
        stranger.request("POST", "/login", {"name": "nobody", "password": "x", "csrf": token})
        ann = Client(portal)
        assert ann.login("ann").status == 303
        reply = ann.get("/api/v1/sites/s1/actions")
        assert reply.status == 200
        seen = json.loads(reply.body)
    logins = {(a["role"], a["source"]) for a in portal.actions("login")}
    assert ("town", "127.0.0.7") in logins and ("operator", "127.0.0.1") in logins  # all recorded
    assert seen and {a["role"] for a in seen} == {"operator"}
    assert not any(a["source"] in ("127.0.0.7", "127.0.0.9") for a in seen)
