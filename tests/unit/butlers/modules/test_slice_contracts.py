"""The import contracts cover every module: a new module's package, store and views are
under the same rules as the others without anyone remembering to list them (the
contracts themselves run in `dev.py lint`)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import butlers.modules
from butlers.modules.registry import MODULE_NAMES

ROOT = Path(__file__).resolve().parents[4]
MODULES = Path(butlers.modules.__file__).parent


def _contract(contract_id: str) -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found: dict[str, list[str]] = next(c for c in contracts if c["id"] == contract_id)
    return found


def test_every_module_is_independent_of_the_others() -> None:
    listed = set(_contract("modules-independent")["modules"])
    assert listed == {f"butlers.modules.{name}" for name in MODULE_NAMES}


def test_every_store_and_views_file_is_kept_free_of_the_mcp_stack() -> None:
    files = {
        f"butlers.modules.{path.parent.name}.{path.stem}"
        for kind in ("store.py", "views.py")
        for path in MODULES.glob(f"*/{kind}")
    }
    assert files <= set(_contract("module-data-without-mcp")["source_modules"])


def test_the_dashboard_may_import_no_module_class() -> None:
    forbidden = set(_contract("dashboard-reads-through-stores")["forbidden_modules"])
    assert {f"butlers.modules.{name}.module" for name in MODULE_NAMES} <= forbidden


def test_a_store_imports_alone() -> None:
    """Importing a module's store or views loads neither FastMCP nor the MCP SDK nor the
    module's class (the package's `__init__` imports nothing)."""
    names = [
        f"butlers.modules.{p.parent.name}.{p.stem}"
        for kind in ("store.py", "views.py")
        for p in sorted(MODULES.glob(f"*/{kind}"))
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastmcp', 'mcp') "
        "or m.endswith('.module')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
