"""A portal whose store refuses writes (a full disk) answers 503 and says nothing was kept.

The disk "fills" for the `minewatch serve` process alone: a file-size limit (RLIMIT_FSIZE, set
and lifted with resource.prlimit) makes the kernel refuse its writes, as a full disk does. A
login is a write (its session), so it is the request tried.
"""

from __future__ import annotations

import resource
from pathlib import Path

from monitor.journal.store import Store
from tests.support.portal_server import Client, Portal, portal_serving


def test_a_store_that_refuses_writes_is_a_503_saying_nothing_was_kept(tmp_path: Path) -> None:
    portal = Portal(tmp_path)
    Store(portal.store).conn.close()  # the daemon's store; an empty one will do

    def config_for(port: int) -> Path:
        portal.port = port
        return portal.write()

    with portal_serving(config_for, tmp_path / "portal.log") as (_, proc):
        client = Client(portal)
        reader = Client(portal)
        assert reader.login("bob").status == 303  # logged in before the disk filled
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
        assert reader.get("/").status == 200  # a page that only reads still works
        refused = client.login("ann")
        assert refused.status == 503, refused.body
        assert refused.headers["retry-after"] == "60"
        assert "nothing you sent was kept" in refused.body
        assert client.get("/").location == "/login"  # no session was given
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        assert client.login("ann").status == 303  # the space is back: logged in
        assert client.get("/").status == 200
    log = (tmp_path / "portal.log").read_text(errors="replace")
    assert "Traceback" not in log, log
