"""The API document's roles are the roles the API answers: a real `minewatch serve`, one token per
role, every path of its own /api/v1/openapi.json asked by every role."""

from __future__ import annotations

import json
import re
from pathlib import Path

from monitor.config import PORTAL_ROLES
from monitor.credentials import hash_token
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
