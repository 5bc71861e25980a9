"""Core tool `status`: who this butler is and how it is doing."""

from fastmcp import FastMCP

from butlers import __version__
from butlers.auth.access import access_meta
from butlers.core.context import ButlerContext
from butlers.jsonutil import AnyJson
from butlers.tooling import tool


def register_status_tool(mcp: FastMCP, butler: ButlerContext) -> None:
    # The owner's view of the butler: no session is offered it.
    operator = {"module": "core"} | access_meta(operator=True)

    @tool(mcp, meta=operator, annotations={"readOnlyHint": True})
    async def status() -> AnyJson:
        """Name, description, modules (with status and phase), uptime, schema, the
        database pool's connections (open, idle, maximum) and the sessions (one
        `running`, how many triggers `queued` behind it)."""
        pool = butler.pool
        return {
            "name": butler.name,
            "description": butler.resource.spec.description,
            "version": __version__,
            "schema": butler.schema,
            "modules": [m.to_json() for m in butler.modules],
            "uptime_seconds": round(butler.uptime_seconds, 3),
            # Restarts of this butler (every start after the first, crashes included).
            "starts": butler.start.to_json() if butler.start else None,
            "pool": {
                "size": pool.get_size(),
                "idle": pool.get_idle_size(),
                "min_size": pool.get_min_size(),
                "max_size": pool.get_max_size(),
            },
            "sessions": butler.session_activity() if butler.session_activity else None,
        }
