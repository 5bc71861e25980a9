"""A butler of the test's own, run beside the ecosystem the way a pod runs one.

Some behaviour needs a butler the roster does not have: a runtime adapter other than
the ecosystem's (the `claude-code` CLI, with a fake `claude` the test writes), an
environment of the test's choosing (an undeclared secret in the process), a broken
module configuration. `solo_butler` provisions a schema and role for it on the
ecosystem's PostgreSQL (named with the session's schema prefix, dropped afterwards),
runs `butlers migrate --spec` as that role (a pod's init container), then
`butlers serve --spec` (its container) on a free port with exactly the environment
given, and yields its MCP URL once `/ready` answers. It registers with the switchboard
only with `advertise`, and then listens where the ecosystem's butlers can call it
(`EcosystemHandle.host_listener`: loopback, or on kind the host's address on kind's network).
Backends whose database this machine cannot reach skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import yaml
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from butlers.auth.tokens import digest, new_user_token
from butlers.db.embedded import free_port
from butlers.db.provision import deprovision, provision
from butlers.waiting import wait_until

from .ecosystem import EcosystemHandle

READY_TIMEOUT = 120.0
MIGRATE_TIMEOUT = 120.0
# The only variables of this process the butler gets: enough to find and run Python.
HOST_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")


@dataclass(frozen=True)
class SoloButler:
    name: str
    url: str  # streamable HTTP, .../mcp
    schema: str
    dsn: str  # its own role
    log_path: Path
    token: str  # its user token

    def client(self, timeout: float = 60) -> Client[Any]:
        """An MCP client with this butler's user token."""
        headers = {"Authorization": f"Bearer {self.token}"}
        return Client(StreamableHttpTransport(self.url, headers=headers), timeout=timeout)


def butler_manifest(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": name},
        "spec": {"port": 40999, **spec},  # the port is overridden by --port
    }


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@asynccontextmanager
async def solo_butler(
    handle: EcosystemHandle,
    directory: Path,
    name: str,
    spec: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    advertise: bool = False,
) -> AsyncIterator[SoloButler]:
    """`advertise`: the butler registers with the switchboard at its own URL (give it
    `BUTLERS_SWITCHBOARD_TOKEN_SHA256` in `env` for the switchboard to call it)."""
    if not handle.admin_dsn:
        pytest.skip(f"backend {handle.backend!r}: this machine cannot reach its PostgreSQL")
    spec_path = directory / f"{name}.yaml"
    manifest = yaml.safe_dump(butler_manifest(name, spec), sort_keys=False)
    await asyncio.to_thread(_write, spec_path, manifest)
    schema = f"{handle.schema_prefix}solo_{secrets.token_hex(2)}_{name}".replace("-", "_")
    credentials = await provision(handle.admin_dsn, schema)
    dsn = credentials.dsn(handle.admin_dsn)
    base = {key: os.environ[key] for key in HOST_ENV if key in os.environ}
    base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
    token = new_user_token()
    own = {
        "BUTLERS_DSN": dsn,
        "BUTLERS_SCHEMA": schema,
        "BUTLERS_USER_TOKEN_SHA256": f"user={digest(token)}",
        "PYTHONUNBUFFERED": "1",
    }
    log_path = directory / f"{name}.log"
    # A butler the ecosystem calls listens where its pods reach it; others on loopback.
    host, fixed_port = handle.host_listener if advertise else ("127.0.0.1", None)
    port = fixed_port or free_port()
    base_url = f"http://{host}:{port}"
    process: asyncio.subprocess.Process | None = None
    try:
        with log_path.open("ab") as log:
            migrate = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "butlers",
                "migrate",
                "--spec",
                str(spec_path),
                env={**base, **own},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
            code = await asyncio.wait_for(migrate.wait(), MIGRATE_TIMEOUT)
            assert code == 0, f"butlers migrate --spec {name} exited {code}:\n{_tail(log_path)}"
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "butlers",
                "serve",
                "--spec",
                str(spec_path),
                "--port",
                str(port),
                env={
                    **base,
                    **(env or {}),
                    **own,
                    **({"BUTLERS_ADVERTISE_URL": f"{base_url}/mcp"} if advertise else {}),
                    "BUTLERS_HOST": host,
                    "BUTLERS_PARENT_PID": str(os.getpid()),
                },
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )

        async def ready() -> bool:
            assert process is not None
            assert process.returncode is None, (
                f"butler {name} exited with {process.returncode}:\n{_tail(log_path)}"
            )
            try:
                async with httpx.AsyncClient(timeout=2.0) as client:
                    return (await client.get(f"{base_url}/ready")).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(
            ready,
            timeout=READY_TIMEOUT,
            message=lambda: f"butler {name} not ready:\n{_tail(log_path)}",
        )
        yield SoloButler(name, f"{base_url}/mcp", schema, dsn, log_path, token)
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                with contextlib.suppress(ProcessLookupError):
                    await process.wait()
        await deprovision(handle.admin_dsn, schema)
