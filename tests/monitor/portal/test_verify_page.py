"""The evidence page's upload-to-verify, through `minewatch serve`: the command's verifier, its
order of problems.

The red-team probe: a bundle whose manifest lied in its counts verified on the page as at the
command (exit 0 there, "internal consistency only" here); and the page listed a failure's problems
"the first first", in the order they were found, so the first listed was not always the one the
verdict named (a row removed, found during the chain walk, before a file no bundle holds).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from html import unescape
from pathlib import Path

from tests.monitor.portal.test_request_limits import multipart
from tests.support.evidence import build_site, export, rewrite
from tests.support.portal_server import Client, serving
from tests.support.portal_server import Portal as Harness

STATEMENT = b"the mine was quiet all day\n"


def _verified(client: Client, bundle: Path) -> str:
    head, tail = multipart("b0undary", [("csrf", client.csrf("/sites/s1/evidence"))], ("bundle", bundle.name))
    reply = client.request(
        "POST",
        "/sites/s1/evidence/verify",
        headers={"Content-Type": "multipart/form-data; boundary=b0undary"},
        body=head + bundle.read_bytes() + tail,
    )
    assert reply.status == 200, reply.body[-2000:]
    return reply.body


def _listed(page: str) -> list[str]:
    """The problems the page lists, in its order (category and message)."""
    found = re.search(r'<ol class="problems" id="verify-problems">(.*?)</ol>', page, re.S)
    assert found is not None, page[-3000:]
    items = re.findall(r"<li>(.*?)</li>", found[1], re.S)
    return [unescape(re.sub(r"<[^>]+>", "", item)) for item in items]


def _bundle(tmp_path: Path) -> Path:
    (tmp_path / "site").mkdir()
    return export(build_site(tmp_path / "site"), tmp_path / "b.zip")


def test_the_verify_page_refuses_a_count_the_manifest_states_that_the_bundle_does_not_hold(
    tmp_path: Path,
) -> None:
    bundle = _bundle(tmp_path)

    def lie(data: bytes) -> bytes:
        manifest = json.loads(data)
        manifest["chain"]["entries"] = 600
        return json.dumps(manifest).encode()

    lying = rewrite(bundle, tmp_path / "lying.zip", {"manifest.json": lie}, rehash=False)

    with serving(Harness(tmp_path / "portal")) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        page = _verified(bob, lying)
        assert (
            "lying.zip: FAILED: manifest not matching: its chain.entries is 600, chain.csv holds 514 entries"
            in page
        ), page[-3000:]
        assert _listed(page) == [
            "manifest manifest not matching: its chain.entries is 600, chain.csv holds 514 entries"
        ]


def test_the_verify_page_lists_the_most_severe_problem_first(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)

    # A row removed (found in the chain walk) and a file no bundle holds, listed in the manifest
    # (found after the walk, and more severe).
    def drop_last(data: bytes) -> bytes:
        return "".join(data.decode().splitlines(keepends=True)[:-1]).encode()

    def statement(data: bytes) -> bytes:
        manifest = json.loads(data)
        manifest["files"].append({"name": "statement.txt", "sha256": hashlib.sha256(STATEMENT).hexdigest()})
        return json.dumps(manifest).encode()

    dropped = rewrite(bundle, tmp_path / "dropped.zip", {"data/light.csv": drop_last})
    two = rewrite(dropped, tmp_path / "two.zip", {"manifest.json": statement}, rehash=False)
    with zipfile.ZipFile(two, "a") as zf:
        zf.writestr("statement.txt", STATEMENT)

    with serving(Harness(tmp_path / "portal")) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        page = _verified(bob, two)
        assert "first first" not in page
        assert "problem(s), the most severe first (the one the first line names):" in page
        said = "file not part of the bundle: statement.txt (not a file of the evidence format)"
        assert f"two.zip: FAILED: {said}" in page, page[-3000:]
        listed = _listed(page)
        assert listed[0] == f"file {said}", listed
        assert [item.split(" ", 1)[0] for item in listed] == ["file", "row"], listed
        assert listed[1].startswith("row row removed: chain seq "), listed


def test_an_unreadable_anchors_file_is_said_once_on_the_page(tmp_path: Path) -> None:
    """An anchors file that is not UTF-8 (a bundle chosen for it) was refused as "anchors:
    anchors: the file: cannot read: not UTF-8 text": the page's prefix before the command's."""
    bundle = _bundle(tmp_path)
    with serving(Harness(tmp_path / "portal")) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        b = "b0undary"

        def part(name: str, value: str) -> bytes:
            return f'--{b}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()

        def file_part(name: str, filename: str, data: bytes) -> bytes:
            head = f'--{b}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            return (head + "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"

        body = (
            part("csrf", bob.csrf("/sites/s1/evidence"))
            + file_part("bundle", bundle.name, bundle.read_bytes())
            + part("against", "file")
            + file_part("anchors", "town-anchors.json", b"\xff\xfe not text")
            + f"--{b}--\r\n".encode()
        )
        reply = bob.request(
            "POST",
            "/sites/s1/evidence/verify",
            headers={"Content-Type": f"multipart/form-data; boundary={b}"},
            body=body,
        )
    assert reply.status == 400, reply.body[-2000:]
    said = unescape(re.sub(r"<[^>]+>", "", reply.body))
    assert "anchors: the file: cannot read: not UTF-8 text" in said, said[-2000:]
    assert "anchors: anchors:" not in said
