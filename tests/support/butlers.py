"""One butler built in the test process with `build_butler`, reached by an in-memory client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastmcp import Client

from butlers.core.context import ButlerContext
from butlers.core.services import SessionServices
from butlers.daemon.butler import Butler
from butlers.settings import ButlerSettings, GoogleEndpoints, RuntimeOverrides
from butlers.spec import ButlerResource

# No process serves this URL: in-process butlers never run a runtime that calls back.
UNUSED_MCP_URL = "http://127.0.0.1:1/mcp"


def make_resource(name: str = "health", **spec: Any) -> ButlerResource:
    """A Butler resource as a roster file would give it; `spec` keys are camelCase."""
    return ButlerResource.model_validate(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": name},
            "spec": {"description": f"{name} butler", "port": 41000, **spec},
        }
    )


def make_settings(
    *,
    environ: Mapping[str, str] | None = None,
    approval_timeout_seconds: float | None = None,
    **runtime: Any,
) -> ButlerSettings:
    """Settings of an in-process butler: `runtime` are `RuntimeOverrides` fields."""
    return ButlerSettings(
        spec_path=Path("unused.yaml"),
        dsn="unused",
        schema=None,
        host="127.0.0.1",
        port=41000,
        runtime=RuntimeOverrides(**runtime),
        tick_interval=3600,
        environ=dict(environ or {}),
        approval_timeout_seconds=approval_timeout_seconds,
        google=GoogleEndpoints.from_env(environ or {}),
    )


@dataclass
class InProcessButler:
    built: Butler
    client: Client[Any]

    @property
    def context(self) -> ButlerContext:
        return self.built.context

    @property
    def services(self) -> SessionServices:
        return self.built.services

    async def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return (await self.client.call_tool(tool, dict(arguments or {}))).data

    async def call_raw(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return await self.client.call_tool(tool, dict(arguments or {}), raise_on_error=False)

    def module(self, name: str) -> dict[str, Any]:
        return next(m.to_json() for m in self.context.modules if m.name == name)

    async def tool_names(self) -> set[str]:
        return {tool.name for tool in await self.client.list_tools()}
