"""What the smoke tests expect of each roster butler, derived from the roster itself.

A butler added to the roster is covered by the smoke tests with no test edited: its
modules come from its Butler spec, each module's tables from the `CREATE TABLE`s of the
module's own migration chain, and each module's status from whether the environment
the ecosystem starts with holds the credentials its configuration names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from butlers.modules.registry import module_class
from butlers.roster import load_roster
from butlers.spec import ButlerResource

_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(\w+)\"?", re.I)


@cache
def roster(directory: Path) -> tuple[ButlerResource, ...]:
    return tuple(load_roster(directory))


def module_tables(module: str) -> set[str]:
    """The tables a module's migration chain creates, and its version table."""
    chain = module_class(module).chain
    if chain is None:
        return set()
    tables = {chain.version_table}
    for script in sorted((chain.directory / "versions").glob("*.py")):
        tables |= {m.group(1) for m in _CREATE_TABLE.finditer(script.read_text())}
    return tables


def domain_tables(resource: ButlerResource) -> set[str]:
    """Every table the butler's enabled modules create in its schema."""
    return set().union(set(), *(module_tables(m) for m in resource.spec.modules))


def expected_modules(
    resource: ButlerResource, environ: Mapping[str, str]
) -> dict[str, tuple[str, str | None]]:
    """Each enabled module's (status, phase) as `status` must report it: failed in phase
    credentials when a variable its configuration names is unset or empty, cascade_failed
    when a module it depends on is not active, active otherwise."""
    result: dict[str, tuple[str, str | None]] = {}
    pending = dict(resource.spec.modules)
    while pending:
        for name, config in sorted(pending.items()):
            cls = module_class(name)
            deps = [d for d in cls.dependencies if d in resource.spec.modules]
            if any(d not in result for d in deps):
                continue
            del pending[name]
            if any(result[d][0] != "active" for d in deps):
                result[name] = ("cascade_failed", "dependencies")
                continue
            names = cls.config_model.model_validate(config or {}).env_names()  # type: ignore[attr-defined]
            missing = [n for n in names if not environ.get(n)]
            result[name] = ("failed", "credentials") if missing else ("active", None)
            break
        else:
            raise AssertionError(f"module dependencies of {resource.name} form a cycle: {pending}")
    return result
