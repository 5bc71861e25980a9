"""Core tools `trigger` (start an LLM session), `session_cancel` (stop one) and `tick`
(run due scheduled tasks)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, FiniteFloat

from butlers.auth.access import access_meta
from butlers.auth.identity import Identity
from butlers.auth.middleware import current_caller
from butlers.core.scheduler import Scheduler
from butlers.core.spawner import (
    IdempotencyConflict,
    NoRuntimeConfigured,
    NotCancellable,
    Spawner,
    SpawnerBusy,
)
from butlers.jsonutil import AnyJson, Prompt, to_json
from butlers.tooling import tool

CORE = {"module": "core"}
# Sources the butler itself records (its scheduler, its switchboard pipeline): no
# caller of `trigger` may claim them, only the switchboard its own.
RESERVED_SOURCES = ("schedule:", "classify:", "switchboard:")
ROUTED = "switchboard:"
# The switchboard may start a session only for a route: one session per route id.
ROUTE_KEY = re.compile(r"route:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A session never starts sessions; the switchboard may route to `trigger`.
TRIGGER = CORE | access_meta(sessions=False, router=True)
TICK = CORE | access_meta(sessions=False)
# Stopping sessions is the user's: a session (reading untrusted text) never stops another.
CANCEL = CORE | access_meta(sessions=False)


RouteRefusal = Callable[[str, str], Awaitable[str | None]]


def register_spawn_tools(
    mcp: FastMCP, spawner: Spawner, scheduler: Scheduler, route_refusal: RouteRefusal
) -> None:
    """`route_refusal(route_id, prompt)`: why the switchboard's call may not run (None
    when the switchboard confirms the route, see `daemon.routes`)."""

    @tool(mcp, meta=TRIGGER)
    async def trigger(
        prompt: Annotated[Prompt, Field(description="What the session should do.")],
        context: Annotated[
            AnyJson, Field(description="Optional JSON handed to the session with the prompt.")
        ] = None,
        trigger_source: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description=(
                    "A label for the session log (default `trigger`); the butler records "
                    "who called: the switchboard's sessions are `switchboard:<label>`, "
                    "and `schedule:`, `classify:`, `switchboard:` are not for other callers."
                ),
            ),
        ] = None,
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
        caller = current_caller()
        if caller.router and not caller.is_user:
            route_id = _route_id(idempotency_key)
            refused = await route_refusal(route_id, prompt)
            if refused is not None:
                raise ToolError(refused)
        # Keys are scoped to the authenticated caller: nobody else can pre-empt them.
        key = f"{caller.label}/{idempotency_key}" if idempotency_key else None
        try:
            result = await spawner.trigger(
                prompt,
                trigger_source=source_of(caller, trigger_source),
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


def source_of(caller: Identity, given: str | None) -> str:
    """The session's `trigger_source`, set by the butler from who called: the switchboard
    (a router identity) records `switchboard:<label>`; any other caller its label, never
    one of the butler's own sources."""
    if caller.router:
        label = (given or "").removeprefix(ROUTED) or "route"
        return ROUTED + label
    if given is None:
        return "trigger"
    if given.startswith(RESERVED_SOURCES):
        raise ToolError(
            f"trigger_source {given!r}: sources starting with "
            f"{', '.join(RESERVED_SOURCES)} are recorded by the butler itself; choose another"
        )
    return given


def _route_id(key: str | None) -> str:
    if key is None or ROUTE_KEY.fullmatch(key) is None:
        raise ToolError(
            "the switchboard's token starts a session only for a route: pass "
            "idempotency_key route:<route id> (a UUID); "
            f"got {'none' if key is None else repr(key[:80])}"
        )
    return key.removeprefix("route:")
