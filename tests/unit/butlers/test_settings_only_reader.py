"""`settings.py` is the only reader of `BUTLERS_*` variables: every other module gets its
settings passed down (writing such a variable for a child process is fine)."""

from __future__ import annotations

import ast
from pathlib import Path

import butlers

SOURCES = Path(butlers.__file__).parent
OWNER = SOURCES / "settings.py"


def _butlers_name(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("BUTLERS_")
    )


def readers(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) of every read of a `BUTLERS_*` name: `x.get("BUTLERS_…")`,
    `os.getenv("BUTLERS_…")`, `x["BUTLERS_…"]` (not as an assignment target) and
    `"BUTLERS_…" in x`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _butlers_name(node.args[0]):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("get", "getenv", "setdefault"):
                found.append((node.lineno, node.args[0].value))  # type: ignore[attr-defined]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _butlers_name(node.slice)
        ):
            found.append((node.lineno, node.slice.value))  # type: ignore[attr-defined]
        elif (
            isinstance(node, ast.Compare)
            and _butlers_name(node.left)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        ):
            found.append((node.lineno, node.left.value))  # type: ignore[attr-defined]
    return found


def test_the_finder_sees_each_way_of_reading() -> None:
    code = (
        "import os\n"
        "a = os.environ.get('BUTLERS_A')\n"
        "b = os.getenv('BUTLERS_B')\n"
        "c = env['BUTLERS_C']\n"
        "d = 'BUTLERS_D' in env\n"
        "env['BUTLERS_E'] = '1'\n"
        "f = os.environ.get('HOME')\n"
    )
    assert [name for _line, name in readers(ast.parse(code))] == [
        "BUTLERS_A",
        "BUTLERS_B",
        "BUTLERS_C",
        "BUTLERS_D",
    ]


def test_settings_is_the_only_reader_of_butlers_variables() -> None:
    found = [
        f"{path.relative_to(SOURCES)}:{line}: {name}"
        for path in sorted(SOURCES.rglob("*.py"))
        if path != OWNER
        for line, name in readers(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], "read these through butlers.settings:\n" + "\n".join(found)
