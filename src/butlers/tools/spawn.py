"""Core tools `trigger` (start an LLM session), `session_cancel` (stop one) and `tick`
(run due scheduled tasks)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, FiniteFloat

from butlers.auth.access import access_meta
from butlers.auth.middleware import current_caller
from butlers.core.scheduler import Scheduler
from butlers.core.spawner import (
    IdempotencyConflict,
    NoRuntimeConfigured,
    NotCancellable,
    Spawner,
    SpawnerBusy,
)
from butlers.jsonutil import AnyJson, to_json
from butlers.tooling import tool

CORE = {"module": "core"}
# A session never starts sessions; the switchboard may route to `trigger`.
TRIGGER = CORE | access_meta(sessions=False, router=True)
TICK = CORE | access_meta(sessions=False)
# Stopping sessions is the user's: a session (reading untrusted text) never stops another.
CANCEL = CORE | access_meta(sessions=False)


def register_spawn_tools(mcp: FastMCP, spawner: Spawner, scheduler: Scheduler) -> None:
    @tool(mcp, meta=TRIGGER)
    async def trigger(
        prompt: Annotated[str, Field(min_length=1, description="What the session should do.")],
        context: Annotated[
            AnyJson, Field(description="Optional JSON handed to the session with the prompt.")
        ] = None,
        trigger_source: Annotated[
            str, Field(min_length=1, max_length=200, description="Who triggered (logged).")
        ] = "trigger",
        timeout_seconds: Annotated[
            FiniteFloat | None,
            Field(gt=0, description="Shorter timeout for this session (spec timeout caps it)."),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Run at most once per key: a repeat returns the first session.",
            ),
        ] = None,
    ) -> AnyJson:
        """Run one LLM session of this butler on its own tools; sessions run one at a time.

        Returns the SpawnerResult: session_id, success, output, error, duration_ms,
        tool_calls [{name, arguments, result}], input_tokens, output_tokens, model, and
        `duplicate` (true when a call with the same idempotency_key ran the session).
        """
        # Keys are scoped to the authenticated caller: nobody else can pre-empt them.
        key = f"{current_caller().label}/{idempotency_key}" if idempotency_key else None
        try:
            result = await spawner.trigger(
                prompt,
                trigger_source=trigger_source,
                context=context,
                timeout_seconds=timeout_seconds,
                idempotency_key=key,
            )
        except (NoRuntimeConfigured, SpawnerBusy, IdempotencyConflict) as exc:
            raise ToolError(str(exc)) from None
        return result.to_json()

    @tool(mcp, meta=CANCEL)
    async def session_cancel(session_id: uuid.UUID) -> AnyJson:
        """Stop a running session of this butler: its model call or tool call in
        progress is abandoned, a call it holds for approval expires, and the session
        ends `cancelled` (returned as recorded). Needs the user's token."""
        try:
            await spawner.cancel(session_id, by=current_caller().label)
        except NotCancellable as exc:
            raise ToolError(str(exc)) from None
        row = await spawner.store.get(session_id)
        if row is None:  # the row was deleted meanwhile
            raise ToolError(f"no session {session_id} on this butler")
        return to_json(row)

    @tool(mcp, meta=TICK)
    async def tick() -> AnyJson:
        """Run every scheduled task that is due now; returns what ran and its outcome."""
        return {"ran": [to_json(run) for run in await scheduler.tick()]}
