"""The `psql` command lines that open this session's databases (logged at its start).

While a session runs (or waits at a breakpoint), `psql '<dsn>'` as a butler's own role
lands in that butler's schema (its role's search_path); the admin line sees them all.
"""

from __future__ import annotations

from .ecosystem import EcosystemHandle


def database_lines(handle: EcosystemHandle) -> list[str]:
    lines = [
        f"psql '{handle.admin_dsn}'  # admin: every schema of this session starts "
        f"with {handle.schema_prefix!r}"
    ]
    for name in handle.names:
        endpoint = handle[name]
        lines.append(f"psql '{endpoint.dsn}'  # {name}: schema {endpoint.schema}")
    return lines
