"""A butler with modules, built in-process (`build_butler`) on a fresh schema."""

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from fastmcp import Client

from butlers import migrations
from butlers.core.secrets import SHARED_TABLE
from butlers.daemon.butler import build_butler
from butlers.db.pool import create_pool
from butlers.db.provision import deprovision, provision
from butlers.modules.loader import butler_chains
from butlers.secretbox import Keyring, new_key
from butlers.stores.secrets import SecretStore
from tests.support.butlers import UNUSED_MCP_URL, InProcessButler, make_resource, make_settings

_counter = itertools.count()
SHARED_DDL = (
    "CREATE TABLE shared_secrets (LIKE secrets INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
    "PRIMARY KEY (key))"
)
ModuleButler = InProcessButler
ButlerFactory = Callable[..., Awaitable[ModuleButler]]


@pytest.fixture
async def module_butler(
    pg_admin_dsn: str, session_tag: str, request: pytest.FixtureRequest
) -> AsyncIterator[ButlerFactory]:
    """`await module_butler(modules={...}, environ={...}, approvals={...})`."""
    async with AsyncExitStack() as stack:

        async def build(
            modules: dict[str, Any],
            environ: Mapping[str, str] | None = None,
            approvals: dict[str, Any] | None = None,
            approval_timeout: float | None = None,
            db_port: int | None = None,
            stored: Mapping[str, str] | None = None,
            shared: Mapping[str, str] | None = None,
            watch_secrets: float | None = None,
            switchboard_url: str | None = None,
        ) -> ModuleButler:
            """`db_port`: the butler's pool reaches PostgreSQL through this local port
            (a proxy the test controls) instead of directly. `stored`: secrets put in
            the butler's store (sealed with a fresh key the butler gets) before it starts;
            `shared`: in a shared store (a `shared_secrets` table in its schema, as the
            dashboard's). `watch_secrets`: the stores are checked for changes this often.
            `switchboard_url`: where inbound connectors hand messages over."""
            schema = f"{session_tag}m{next(_counter)}"
            resource = make_resource(
                "probe", description="test butler", modules=modules, approvals=approvals or {}
            )
            credentials = await provision(pg_admin_dsn, schema)
            if not request.config.getoption("--keep-schemas"):
                stack.push_async_callback(deprovision, pg_admin_dsn, schema)
            dsn = credentials.dsn(pg_admin_dsn)
            await migrations.upgrade(dsn, schema, butler_chains(modules))
            if db_port is not None:
                dsn = _through(dsn, db_port)
            pool = await create_pool(dsn, schema)
            stack.push_async_callback(pool.close)
            settings = make_settings(environ=environ, approval_timeout_seconds=approval_timeout)
            if stored is not None or shared is not None:
                key = new_key()
                for name, value in (stored or {}).items():
                    await SecretStore(pool).put(name, keyring=Keyring.parse(key), value=value)
                settings = replace(settings, secrets_key=key)
            if shared is not None:
                await pool.execute(SHARED_DDL)
                for name, value in shared.items():
                    await SecretStore(pool, SHARED_TABLE).put(
                        name, keyring=Keyring.parse(key), value=value
                    )
                settings = replace(settings, shared_secrets_schema=schema)
            if watch_secrets is not None:
                settings = replace(settings, secrets_reload_seconds=watch_secrets)
            if switchboard_url is not None:
                settings = replace(settings, switchboard_url=switchboard_url)
            built = await build_butler(
                resource, pool, settings, schema=schema, mcp_url=UNUSED_MCP_URL
            )
            stack.push_async_callback(built.aclose)
            if watch_secrets is not None:
                built.watch_secrets()
            client = await stack.enter_async_context(Client(built.server))
            return ModuleButler(built=built, client=client)

        yield build


def _through(dsn: str, port: int) -> str:
    """`dsn` with its host and port replaced by 127.0.0.1:`port`."""
    parts = urlsplit(dsn)
    credentials = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{credentials}@127.0.0.1:{port}"))
