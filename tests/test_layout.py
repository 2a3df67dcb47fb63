"""The floor plan holds: no import cycle, and only monitor/journal/ speaks SQL to the journal's tables.

Both read the source as text (ast), so a cycle hidden in a function-level import counts too,
and nothing of the project is imported to check it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from monitor.journal.migrations import MIGRATIONS
from tests.support.paths import REPO

PACKAGES = ("monitor", "rules", "sensors")
# The journal's own migrations: the tables they create are the journal's (not the notices',
# deliveries' or the outbox's, whose modules own them).
JOURNAL_MIGRATIONS = {"store-layout-2", "store", "portal-actions", "waveforms", "sound-hours"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules ``path`` imports at run time, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from pkg import sub`` imports the module pkg.sub when there is one
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        yield from (name for name in names if name in known)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_hidden_back_edge() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_the_projects_modules() -> None:
    known = modules()
    graph = {name: set(imports_of(path, known)) - {name} for name, path in known.items()}
    assert cycles(graph) == []


def journal_tables() -> set[str]:
    tables: set[str] = set()
    for migration in MIGRATIONS:
        if migration.name in JOURNAL_MIGRATIONS and isinstance(migration.sql, str):
            tables |= set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", migration.sql))
    return tables


def sql_on(tables: set[str], text: str) -> set[str]:
    """The tables of ``tables`` that a string of SQL reads or writes."""
    if not re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH)\b", text, re.IGNORECASE):
        return set()
    named = re.findall(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(\w+)", text, re.IGNORECASE)
    return tables & set(named)


def test_the_sql_finder_sees_reads_and_writes() -> None:
    tables = {"sound", "events"}
    assert sql_on(tables, "SELECT a FROM sound s JOIN events e ON 1") == {"sound", "events"}
    assert sql_on(tables, "INSERT INTO events VALUES (?)") == {"events"}
    assert sql_on(tables, "the sound FROM events, said in prose") == set()
    assert sql_on(tables, "SELECT id FROM notices") == set()


def test_only_the_journal_speaks_sql_to_its_tables() -> None:
    tables = journal_tables()
    assert {"sound", "events", "findings", "chain", "portal_actions"} <= tables
    offenders = []
    for name, path in modules().items():
        if name.startswith("monitor.journal"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                parts = node.values
            elif isinstance(node, ast.Constant):
                parts = [node]
            else:
                continue
            text = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
            if touched := sql_on(tables, text):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {', '.join(sorted(touched))}")
    assert offenders == []
