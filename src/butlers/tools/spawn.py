"""Core tools `trigger` (start an LLM session) and `tick` (run due scheduled tasks)."""

from __future__ import annotations

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue

from butlers.core.scheduler import Scheduler
from butlers.core.spawner import NoRuntimeConfigured, Spawner

CORE = {"module": "core"}


def register_spawn_tools(mcp: FastMCP, spawner: Spawner, scheduler: Scheduler) -> None:
    @mcp.tool(meta=CORE)
    async def trigger(
        prompt: Annotated[str, Field(min_length=1, description="What the session should do.")],
        context: Annotated[
            JsonValue, Field(description="Optional JSON handed to the session with the prompt.")
        ] = None,
        trigger_source: Annotated[
            str, Field(min_length=1, max_length=200, description="Who triggered (logged).")
        ] = "trigger",
        timeout_seconds: Annotated[
            float | None,
            Field(gt=0, description="Shorter timeout for this session (spec timeout caps it)."),
        ] = None,
    ) -> JsonValue:
        """Run one LLM session of this butler on its own tools; sessions run one at a time.

        Returns the SpawnerResult: session_id, success, output, error, duration_ms,
        tool_calls [{name, arguments, result}], input_tokens, output_tokens, model.
        """
        try:
            result = await spawner.trigger(
                prompt,
                trigger_source=trigger_source,
                context=context,
                timeout_seconds=timeout_seconds,
            )
        except NoRuntimeConfigured as exc:
            raise ToolError(str(exc)) from None
        return result.to_json()

    @mcp.tool(meta=CORE)
    async def tick() -> JsonValue:
        """Run every scheduled task that is due now; returns what ran and its outcome."""
        return {"ran": await scheduler.tick()}  # type: ignore[dict-item]
