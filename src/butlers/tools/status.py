"""Core tool `status`: who this butler is and how it is doing."""

from fastmcp import FastMCP
from pydantic import JsonValue

from butlers import __version__
from butlers.core.context import ButlerContext


def register_status_tool(mcp: FastMCP, butler: ButlerContext) -> None:
    @mcp.tool(meta={"module": "core"}, annotations={"readOnlyHint": True})
    async def status() -> JsonValue:
        """Name, description, modules (with status and phase), uptime and schema."""
        return {
            "name": butler.name,
            "description": butler.resource.spec.description,
            "version": __version__,
            "schema": butler.schema,
            "modules": [m.to_json() for m in butler.modules],
            "uptime_seconds": round(butler.uptime_seconds, 3),
        }
