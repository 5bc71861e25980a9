"""A butler's server with its spawner and scheduler in-process, on a fresh schema."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP

from butlers.core.context import ButlerContext
from butlers.core.services import SessionServices, build_session_services
from butlers.daemon.server import build_server, register_session_service_tools
from butlers.settings import ButlerSettings, RuntimeOverrides
from butlers.spec import ButlerResource
from butlers.testing.script_server import ScriptServer


@dataclass
class ButlerApp:
    mcp: FastMCP
    services: SessionServices
    butler: ButlerContext
    client: Client[Any]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        return (await self.client.call_tool(tool, arguments or {})).data


def make_resource(name: str = "health", **spec: Any) -> ButlerResource:
    return ButlerResource.model_validate(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": name},
            "spec": {"description": f"{name} butler", "port": 41000, **spec},
        }
    )


def make_settings(**runtime: Any) -> ButlerSettings:
    environ = runtime.pop("environ", {})
    return ButlerSettings(
        spec_path=Path("unused.yaml"),
        dsn="unused",
        schema=None,
        host="127.0.0.1",
        port=41000,
        runtime=RuntimeOverrides(**runtime),
        tick_interval=3600,
        environ=environ,
    )


@pytest.fixture
async def make_app(
    butler_schema: Any, llm_script_server: ScriptServer
) -> AsyncIterator[Callable[..., Any]]:
    """Build a butler app: `await make_app(resource=..., settings=...)`, scripted by default."""
    opened: list[tuple[Client[Any], SessionServices]] = []

    async def build(
        resource: ButlerResource | None = None, settings: ButlerSettings | None = None
    ) -> ButlerApp:
        resource = resource or make_resource()
        settings = settings or make_settings(adapter="scripted", script_url=llm_script_server.url)
        if settings.runtime.adapter == "scripted" and not settings.runtime.script_url:
            settings = replace(
                settings, runtime=replace(settings.runtime, script_url=llm_script_server.url)
            )
        butler = ButlerContext(
            resource=resource, schema=butler_schema.schema, pool=butler_schema.pool
        )
        mcp = build_server(butler)
        services = build_session_services(mcp, butler, settings, mcp_url="http://127.0.0.1:1/mcp")
        register_session_service_tools(mcp, services)
        await services.scheduler.store.sync_spec(list(resource.spec.schedules))
        client = Client(mcp, timeout=30)
        await client.__aenter__()
        opened.append((client, services))
        return ButlerApp(mcp=mcp, services=services, butler=butler, client=client)

    yield build
    for client, services in opened:
        await client.__aexit__(None, None, None)
        await services.aclose()
