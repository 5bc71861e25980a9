"""Tool naming compliance: every tool any butler can register has a name every model
API and MCP client accepts, says what it does, and no two packages define the same
name (any set of modules can be enabled together without a collision).

Read from the source (each function registered with `tool(mcp, ...)`), so modules that
need credentials to start (telegram, email) are covered too.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import butlers

SRC = Path(butlers.__file__).parent
# snake_case, a letter first: what Anthropic's and OpenAI's tool names allow, and short
# enough that Claude Code's `mcp__<butler>__<tool>` stays within its 64 characters for a
# butler name of up to 20.
NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_LENGTH = 64 - len("mcp____") - 20


def _tool_call(node: ast.AST, args: int) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "tool"
        and len(node.args) == args
    )


def _named(call: ast.Call) -> str | None:
    named = [k.value for k in call.keywords if k.arg == "name"]
    return str(named[0].value) if named and isinstance(named[0], ast.Constant) else None


def registered_tools() -> dict[str, list[tuple[str, bool]]]:
    """Tool name → [(file, has a description)] for every tool in the source: functions
    decorated with `@tool(mcp, ...)` and functions passed to `tool(mcp, fn, ...)`."""
    found: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for path in sorted(p for p in SRC.rglob("*.py") if p.name != "tooling.py"):
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(SRC))
        functions = {
            n.name: n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for function in functions.values():
            for decorator in function.decorator_list:
                if _tool_call(decorator, 1):
                    assert isinstance(decorator, ast.Call)
                    described = bool(ast.get_docstring(function)) or any(
                        k.arg == "description" for k in decorator.keywords
                    )
                    found[_named(decorator) or function.name].append((where, described))
        for node in ast.walk(tree):
            if _tool_call(node, 2) and isinstance(node, ast.Call):
                target = node.args[1]
                if not isinstance(target, ast.Name):
                    continue
                function = functions.get(target.id)
                described = bool(function and ast.get_docstring(function)) or any(
                    k.arg == "description" for k in node.keywords
                )
                found[_named(node) or target.id].append((where, described))
    return found


def test_the_source_registers_tools_of_every_module() -> None:
    files = {f for places in registered_tools().values() for f, _ in places}
    for module in ("approvals", "contacts", "email", "general", "health", "messenger"):
        assert any(f.startswith(f"modules/{module}/") for f in files), module
    assert {"status", "state_get", "trigger", "contact_add", "telegram_send"} <= set(
        registered_tools()
    )


def test_tool_names_are_snake_case_and_short_enough() -> None:
    bad = [n for n in registered_tools() if not NAME.match(n) or len(n) > MAX_LENGTH]
    assert not bad, f"tool names must match {NAME.pattern} and be at most {MAX_LENGTH}: {bad}"


def test_every_tool_has_a_description() -> None:
    bare = [(name, f) for name, places in registered_tools().items() for f, ok in places if not ok]
    assert not bare, f"tools without a docstring (their description for the model): {bare}"


def test_no_two_packages_register_the_same_tool_name() -> None:
    clashes = {
        name: sorted({f.rsplit("/", 1)[0] if "/" in f else f for f, _ in places})
        for name, places in registered_tools().items()
    }
    assert not {n: p for n, p in clashes.items() if len(p) > 1}
