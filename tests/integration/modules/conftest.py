"""A butler with modules, built in-process on a fresh schema, reached by an in-memory client."""

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from fastmcp import Client, FastMCP

from butlers import migrations
from butlers.core.context import ButlerContext
from butlers.daemon.server import build_server, install_schema_lookup
from butlers.db.pool import create_pool
from butlers.db.provision import deprovision, provision
from butlers.modules.loader import ModuleSet, module_chains, start_modules
from butlers.spec import ButlerResource

_counter = itertools.count()


@dataclass
class ModuleButler:
    butler: ButlerContext
    mcp: FastMCP
    client: Client
    module_set: ModuleSet

    async def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return (await self.client.call_tool(tool, dict(arguments or {}))).data

    async def call_raw(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return await self.client.call_tool(tool, dict(arguments or {}), raise_on_error=False)

    def module(self, name: str) -> dict[str, Any]:
        return next(m.to_json() for m in self.butler.modules if m.name == name)

    async def tool_names(self) -> set[str]:
        return {tool.name for tool in await self.client.list_tools()}


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
        ) -> ModuleButler:
            schema = f"{session_tag}m{next(_counter)}"
            resource = ButlerResource.model_validate(
                {
                    "apiVersion": "butlers.dev/v1alpha1",
                    "kind": "Butler",
                    "metadata": {"name": "probe"},
                    "spec": {
                        "description": "test butler",
                        "port": 40999,
                        "modules": modules,
                        "approvals": approvals or {},
                    },
                }
            )
            credentials = await provision(pg_admin_dsn, schema)
            if not request.config.getoption("--keep-schemas"):
                stack.push_async_callback(deprovision, pg_admin_dsn, schema)
            dsn = credentials.dsn(pg_admin_dsn)
            await migrations.upgrade(dsn, schema, [migrations.CORE, *module_chains(modules)])
            pool = await create_pool(dsn, schema)
            stack.push_async_callback(pool.close)
            butler = ButlerContext(
                resource=resource,
                schema=schema,
                pool=pool,
                environ=dict(environ or {}),
                approval_timeout_seconds=approval_timeout,
            )
            mcp = build_server(butler)
            started = await start_modules(mcp, butler)
            stack.push_async_callback(started.stop)
            await install_schema_lookup(mcp)
            client = await stack.enter_async_context(Client(mcp))
            return ModuleButler(butler=butler, mcp=mcp, client=client, module_set=started)

        yield build
