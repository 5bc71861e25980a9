"""The import contracts cover every module: a new module's package, store and views are
under the same rules as the others without anyone remembering to list them (the
contracts themselves run in `dev.py lint`)."""

from __future__ import annotations

import re
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


_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(\w+)\"?", re.I)


def _module_tables() -> dict[str, str]:
    """Every table a module's migration chain creates → the module."""
    return {
        match.group(1): script.parents[2].name
        for script in sorted(MODULES.glob("*/migrations/versions/*.py"))
        for match in _CREATE_TABLE.finditer(script.read_text())
    }


def test_the_dashboard_reads_module_tables_through_the_stores_only() -> None:
    """No dashboard file names a module's table in SQL: its reads of them are the module
    store's (`modules/<name>/store.py`), so a table's SQL has one home. (SQL keywords
    are written in capitals here, as everywhere in the code.)"""
    tables = _module_tables()
    assert {"approvals", "message_inbox", "routing_log", "deliveries"} <= set(tables)
    dashboard = MODULES.parent / "dashboard"
    named = [
        f"{path.relative_to(dashboard)}: {match.group(0)!r} (a table of {tables[table]})"
        for path in sorted(dashboard.rglob("*.py"))
        for table in tables
        for match in re.finditer(
            rf"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+\"?{table}\b", path.read_text()
        )
    ]
    assert not named, "SQL of module tables in the dashboard (move it into the store):\n" + (
        "\n".join(named)
    )
