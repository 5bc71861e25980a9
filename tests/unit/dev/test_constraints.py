"""One lock: `constraints.txt` pins every runtime dependency (the MCP SDK's `mcp` and
`mcp-types` among them), this environment holds exactly those versions, and dev.py and the
images' wheelhouse install with it."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            found[_name(name)] = version.strip()
    return found


def runtime_requirements() -> set[str]:
    """The runtime's dependencies (and the extras the images install), with everything
    they need in turn, as installed here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [
        *project["dependencies"],
        *project["optional-dependencies"]["operator"],
        *project["optional-dependencies"]["embedded"],
    ]
    seen: set[str] = set()
    expanded: set[tuple[str, str]] = set()  # (package, extra) whose requirements are in
    while todo:
        requirement = Requirement(todo.pop())
        name = _name(requirement.name)
        seen.add(name)
        for extra in ("", *sorted(requirement.extras)):
            if (name, extra) in expanded:
                continue
            expanded.add((name, extra))
            for line in metadata.requires(name) or []:
                marker = Requirement(line).marker
                if marker is None or marker.evaluate({"extra": extra}):
                    todo.append(line)
    return seen


def test_every_runtime_dependency_is_pinned_at_the_version_installed() -> None:
    locked = pins()
    wanted = runtime_requirements()
    assert {"mcp", "mcp-types", "fastmcp"} <= wanted
    missing = sorted(wanted - set(locked))
    assert missing == [], f"not pinned in constraints.txt (python3 dev.py lock): {missing}"
    drifted = {
        n: (locked[n], metadata.version(n)) for n in wanted if metadata.version(n) != locked[n]
    }
    assert drifted == {}, f"pinned vs installed: {drifted} (python3 dev.py setup)"


def test_dev_and_the_images_install_with_the_lock() -> None:
    assert '"-c", str(CONSTRAINTS)' in (ROOT / "dev.py").read_text()
    assert 'root / "constraints.txt"' in (ROOT / "images" / "base.py").read_text()
