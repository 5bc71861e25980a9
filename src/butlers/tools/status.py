"""Core tool `status`: who this butler is and how it is doing."""

from fastmcp import FastMCP
from pydantic import JsonValue

from butlers import __version__
from butlers.daemon.runtime import ButlerRuntime


def register_status_tool(mcp: FastMCP, runtime: ButlerRuntime) -> None:
    @mcp.tool(meta={"module": "core"}, annotations={"readOnlyHint": True})
    async def status() -> JsonValue:
        """Name, description, modules (with status and phase), uptime and schema."""
        return {
            "name": runtime.name,
            "description": runtime.resource.spec.description,
            "version": __version__,
            "schema": runtime.schema,
            "modules": [m.to_json() for m in runtime.modules],
            "uptime_seconds": round(runtime.uptime_seconds, 3),
        }
