"""Private names of FastMCP and the MCP SDK are used only by the daemon's fast-path files,
so an upgrade of either (pinned in `constraints.txt`) has one place to look at."""

from __future__ import annotations

import ast
from pathlib import Path

import butlers

SOURCES = Path(butlers.__file__).parent
FAST_PATH = {"daemon/direct.py", "daemon/calls.py", "daemon/server.py"}
PACKAGES = ("fastmcp", "mcp", "mcp_types")
# Private attributes of FastMCP/SDK objects the fast path reaches into.
PRIVATE_ATTRIBUTES = {
    "_mcp_server",
    "_server_instances",
    "_session_owners",
    "_idle_timeout",
    "_requests_in_flight",
    "_raw_mcp_result",
    "_run_body",
    "_tool_manager",
    "_local_provider",
}


def private_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            parts = node.module.split(".")
            found += [f"{node.lineno}: {node.module}" for p in parts if p.startswith("_")][:1]
            found += [
                f"{node.lineno}: {node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_")
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: {a.name}"
                for a in node.names
                if a.name.split(".")[0] in PACKAGES
                and any(p.startswith("_") for p in a.name.split("."))
            ]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_the_finder_sees_private_imports_and_attributes() -> None:
    code = (
        "from fastmcp.server.context import _current_context\n"
        "from mcp.server._impl import x\n"
        "from fastmcp import FastMCP\n"
        "lookup = server._mcp_server.get_tool_input_schema\n"
    )
    assert private_uses(ast.parse(code)) == [
        "1: fastmcp.server.context._current_context",
        "2: mcp.server._impl",
        "4: ._mcp_server",
    ]


def test_only_the_fast_path_uses_private_names_of_fastmcp_and_the_sdk() -> None:
    found = [
        f"{path.relative_to(SOURCES).as_posix()}:{use}"
        for path in sorted(SOURCES.rglob("*.py"))
        if path.relative_to(SOURCES).as_posix() not in FAST_PATH
        for use in private_uses(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], "private FastMCP/MCP names outside the fast path:\n" + "\n".join(found)


def test_the_fast_path_files_still_exist() -> None:
    assert all((SOURCES / name).exists() for name in FAST_PATH)
