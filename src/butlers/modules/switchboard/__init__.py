"""`switchboard`: ingest messages, classify them, and route each part to a butler.

Tables: `message_inbox` (idempotent on the envelope's key), `butler_registry`
(butlers register themselves and keep a heartbeat), `routing_log` (one row per
target) and `fanout_execution_log` (one row per message).
"""

import uuid
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue, ValidationError

from butlers.jsonutil import to_json
from butlers.mcp_clients import ClientCache
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.switchboard.pipeline import Pipeline, _classification_json, _outcome_json
from butlers.modules.switchboard.store import SwitchboardStore
from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.envelope import parse_envelope

NAME = "switchboard"
Seconds = Annotated[float, Field(gt=0, le=3600)]


class SwitchboardConfig(ModuleConfig):
    classification_timeout_seconds: Seconds = 60.0
    route_timeout_seconds: Seconds = 600.0
    # A butler whose last heartbeat is older than this is shown as not alive.
    heartbeat_stale_seconds: Seconds = 90.0


def _validation_message(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in err['loc']) or '(envelope)'}: {err['msg']}"
        for err in exc.errors()
    ]
    return "invalid IngestEnvelopeV1: " + "; ".join(problems)


class SwitchboardModule(Module):
    name = NAME
    config_model = SwitchboardConfig
    chain = migration_chain(NAME, __file__)
    # A classification session must not re-enter the pipeline.
    session_hidden_tools = ("ingest_v1", "classify_message", "route")

    def __init__(self) -> None:
        self._pipeline: Pipeline | None = None

    async def start(self, ctx: ModuleContext) -> None:
        config: SwitchboardConfig = ctx.config
        services = ctx.services
        self._pipeline = Pipeline(
            butler=ctx.butler.name,
            store=SwitchboardStore(ctx.pool),
            clients=ClientCache(timeout=config.route_timeout_seconds + 30),
            spawner=lambda: services.get("spawner"),
            classification_timeout=config.classification_timeout_seconds,
            route_timeout=config.route_timeout_seconds,
            stale_after=config.heartbeat_stale_seconds,
        )

    async def stop(self) -> None:
        if self._pipeline is not None:
            await self._pipeline.aclose()

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        pipeline = self._pipeline
        assert pipeline is not None
        store = SwitchboardStore(ctx.pool)
        config: SwitchboardConfig = ctx.config
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}

        @mcp.tool(meta=meta)
        async def ingest_v1(
            envelope: Annotated[dict[str, JsonValue], Field(description="An IngestEnvelopeV1.")],
            wait: Annotated[
                bool, Field(description="Return only after classification and dispatch.")
            ] = False,
            route_timeout_seconds: Seconds | None = None,
            classification_timeout_seconds: Seconds | None = None,
        ) -> JsonValue:
            """Accept a message: persisted once per idempotency key, then classified and routed.

            Returns {status: "accepted", request_id, duplicate}; with wait=true also the
            classification and one route result per target butler.
            """
            try:
                parsed = parse_envelope(envelope)
            except ValidationError as exc:
                raise ToolError(_validation_message(exc)) from None
            return await pipeline.ingest(  # type: ignore[return-value]
                parsed,
                wait=wait,
                route_timeout=route_timeout_seconds,
                classification_timeout=classification_timeout_seconds,
            )

        @mcp.tool(meta=meta)
        async def classify_message(
            text: Annotated[str, Field(min_length=1, max_length=100_000)],
        ) -> JsonValue:
            """Split a message into {butler, prompt, segment} entries (nothing is routed)."""
            return _classification_json(await pipeline.classify(text))  # type: ignore[return-value]

        @mcp.tool(meta=meta)
        async def route(
            butler: Annotated[str, Field(min_length=1)],
            prompt: Annotated[str, Field(min_length=1)],
            timeout_seconds: Seconds | None = None,
        ) -> JsonValue:
            """Hand one prompt to a registered butler's `trigger`; logged in routing_log."""
            outcome = await pipeline.route(
                RouteEntry(butler, prompt, prompt), request_id=None, timeout=timeout_seconds
            )
            return _outcome_json(outcome)  # type: ignore[return-value]

        @mcp.tool(meta=meta)
        async def butler_register(
            name: Annotated[str, Field(pattern=r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")],
            description: Annotated[str, Field(min_length=1)],
            url: Annotated[str, Field(pattern=r"^https?://")],
            hints: list[str] | None = None,
            modules: list[str] | None = None,
        ) -> JsonValue:
            """Register (or re-register) a butler and its MCP URL for routing."""
            await store.register(name, description, url, hints or [], modules or [])
            return {"registered": name, "url": url}

        @mcp.tool(meta=meta)
        async def butler_heartbeat(name: str) -> JsonValue:
            """Mark a registered butler alive; `known` is false when it must register again."""
            return {"name": name, "known": await store.heartbeat(name)}

        @mcp.tool(meta=meta, annotations=read)
        async def butler_registry_list() -> JsonValue:
            """Registered butlers with URL, hints, modules, last heartbeat and liveness."""
            rows = await store.registry(config.heartbeat_stale_seconds)
            return to_json(rows)  # type: ignore[no-any-return]

        @mcp.tool(meta=meta, annotations=read)
        async def routing_log_list(
            request_id: str | None = None, limit: Annotated[int, Field(ge=1, le=500)] = 50
        ) -> JsonValue:
            """Routing decisions and their outcomes, newest first."""
            key = _uuid(request_id) if request_id else None
            return to_json(await store.routes(key, limit))  # type: ignore[no-any-return]

        @mcp.tool(meta=meta, annotations=read)
        async def switchboard_stats() -> JsonValue:
            """MCP clients opened so far and cached now, and messages being processed."""
            return pipeline.stats()  # type: ignore[return-value]

        @mcp.tool(meta=meta, annotations=read)
        async def message_get(request_id: str) -> JsonValue:
            """One ingested message with its status, classification and routes."""
            key = _uuid(request_id)
            message = await store.message(key)
            if message is None:
                raise ToolError(f"no message with request_id {request_id}")
            return to_json(message | {"routes": await store.routes(key, 100)})  # type: ignore[no-any-return]


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ToolError(f"{value!r} is not a UUID") from None
