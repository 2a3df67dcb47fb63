"""The API document's roles are the roles the API answers: a real `minewatch serve`, one token per
role, every path of its own /api/v1/openapi.json asked by every role."""

from __future__ import annotations

import json
import re
from pathlib import Path

from monitor.config import PORTAL_ROLES
from monitor.credentials import hash_token
from monitor.portal.openapi import document
from tests.support.paths import REPO
from tests.support.portal_server import Client, Portal, serving

TOKENS = {"ann": "operator-token-1", "bob": "town-token-1", "ida": "inspector-token-1"}
ROLE_OF = {"ann": "operator", "bob": "town", "ida": "inspector"}


def test_every_path_is_refused_to_exactly_the_roles_its_document_leaves_out(tmp_path: Path) -> None:
    portal = Portal(
        tmp_path,
        accounts={"ann": ("operator", '["s1"]'), "bob": ("town", "[]"), "ida": ("inspector", '["s1"]')},
        account_extra={name: f'token_hash = "{hash_token(token)}"\n' for name, token in TOKENS.items()},
    )
    with serving(portal) as served:
        client = Client(served)
        document = client.get("/api/v1/openapi.json")
        assert document.status == 200
        paths = json.loads(document.body)["paths"]
        assert len(paths) == 8
        for path, item in paths.items():
            said = re.match(r"Roles: ([a-z, ]+)\.", item["get"]["description"])
            assert said, f"{path}: its description names no roles"
            roles = set(PORTAL_ROLES) if said.group(1) == "all" else set(said.group(1).split(", "))
            assert roles <= set(PORTAL_ROLES), path
            url = "/api/v1" + path.replace("{site}", "s1").replace("{notice}", "no-such-notice")
            for name, token in TOKENS.items():
                status = client.get(url, {"Authorization": f"Bearer {token}"}).status
                if ROLE_OF[name] in roles:
                    # A notice nobody has is not found; every other path answers.
                    assert status == (404 if "{notice}" in path else 200), (path, name, status)
                else:
                    assert status == 403, (path, name, status)


def test_portal_md_lists_for_each_role_the_api_paths_the_document_gives_it() -> None:
    """docs/PORTAL.md's "Who sees what" table names each role's API paths by their last part
    (`notices/{id}` for /notices/{notice}); the operator's lacked `actions`."""
    paths = document("test")["paths"]
    given: dict[str, set[str]] = {role: set() for role in PORTAL_ROLES}
    for path, item in paths.items():
        said = re.match(r"Roles: ([a-z, ]+)\.", item["get"]["description"])
        assert said, path
        if said.group(1) == "all":
            continue  # /sites: every account's, not in the table
        name = "notices/{id}" if path == "/notices/{notice}" else path.rsplit("/", 1)[1]
        for role in said.group(1).split(", "):
            given[role].add(name)
    table = (REPO / "docs" / "PORTAL.md").read_text()
    for role in PORTAL_ROLES:
        row = re.search(rf"^\| `{role}` \|.*\| ([^|]*) \|$", table, re.MULTILINE)
        assert row, f"no row for {role} in docs/PORTAL.md"
        assert set(re.findall(r"`([^`]+)`", row.group(1))) == given[role], role
