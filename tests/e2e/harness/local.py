"""The `local` backend: the same machinery as `butlers up`, on free ports and fresh schemas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from butlers.db.provision import deprovision
from butlers.ecosystem.supervisor import Ecosystem
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings

from .ecosystem import ButlerEndpoint, EcosystemHandle


async def kill_process(process: Any) -> None:
    """Stop a butler's or the dashboard's process abruptly (SIGKILL), as a crash would."""
    if process is not None and process.poll() is None:
        process.kill()
        await asyncio.to_thread(process.wait)


@asynccontextmanager
async def local_ecosystem(
    *,
    admin_dsn: str,
    roster_dir: Path,
    data_dir: Path,
    schema_prefix: str,
    extra_env: dict[str, str] | None = None,
    keep_schemas: bool = False,
    log_level: str = "INFO",
    dashboard: bool = True,
) -> AsyncIterator[EcosystemHandle]:
    settings = EcosystemSettings(
        data_dir=data_dir,
        roster_dir=roster_dir,
        database_url=admin_dsn,
        schema_prefix=schema_prefix,
        free_ports=True,
        log_level=log_level,
        dashboard=dashboard,
    )
    ecosystem = Ecosystem(
        settings=settings, resources=load_roster(roster_dir), extra_env=dict(extra_env or {})
    )
    try:
        await ecosystem.start()
        tokens = ecosystem.tokens
        assert tokens is not None
        handle = EcosystemHandle(
            backend="local",
            endpoints={
                name: ButlerEndpoint(
                    name=name,
                    url=b.url,
                    sse_url=f"{b.base_url}/sse",
                    port=b.port,
                    schema=b.schema,
                    dsn=b.dsn,
                )
                for name, b in ecosystem.butlers.items()
            },
            admin_dsn=admin_dsn,
            token=tokens.user_token,
            butler_tokens={name: tokens.butler_token(name) for name in ecosystem.butlers},
            kill=lambda name: kill_process(ecosystem.butlers[name].process),
            restart=ecosystem.restart_butler,
            pid=lambda name: (
                ecosystem.butlers[name].process.pid  # type: ignore[union-attr]
                if ecosystem.butlers[name].process
                else None
            ),
            log_dir=data_dir / "logs",
            secrets_key_file=data_dir / "auth" / "secrets.key",
            schema_prefix=schema_prefix,
            span_dir=Path(extra_env["BUTLERS_SPAN_DIR"])
            if extra_env and "BUTLERS_SPAN_DIR" in extra_env
            else None,
            dashboard_url=ecosystem.dashboard.url if ecosystem.dashboard else None,
            # A local ecosystem's dashboard signs in with the user's token.
            dashboard_token=tokens.user_token if ecosystem.dashboard else None,
            dashboard_dsn=ecosystem.dashboard.dsn if ecosystem.dashboard else None,
            dashboard_schema=ecosystem.dashboard.credentials.schema
            if ecosystem.dashboard
            else None,
            kill_dashboard=lambda: kill_process(
                ecosystem.dashboard.process if ecosystem.dashboard else None
            ),
            restart_dashboard=ecosystem.restart_dashboard,
        )
        try:
            yield handle
        finally:
            await handle.close()
    finally:
        await ecosystem.stop()
        if not keep_schemas:
            for butler in ecosystem.butlers.values():
                await deprovision(admin_dsn, butler.schema)
            if ecosystem.dashboard is not None:
                reader = ecosystem.dashboard.credentials
                await deprovision(admin_dsn, reader.schema, role=reader.role)
