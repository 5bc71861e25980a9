"""The `switchboard` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import contextlib
import uuid
from dataclasses import asdict
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import BeforeValidator, Field, ValidationError

from butlers.auth.access import access_meta
from butlers.auth.middleware import current_caller
from butlers.jsonutil import MAX_FIELD_CHARS, AnyJson, Prompt, json_object, to_json
from butlers.mcp_clients import McpClient
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.switchboard.inbox_store import IdempotencyConflict, SwitchboardStore
from butlers.modules.switchboard.owner import register_owner_tools
from butlers.modules.switchboard.pipeline import Pipeline
from butlers.modules.switchboard.registry import expire_stale_entries, register_registry_tools
from butlers.modules.switchboard.triage_store import TriageStore
from butlers.modules.switchboard.triage_tools import TRIAGE_WRITE_TOOLS, register_triage_tools
from butlers.spec import NAME_PATTERN, SWITCHBOARD_MODULE
from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.envelope import IngestEnvelopeV1, parse_envelope
from butlers.switchboard.owners import Owners, channels_of
from butlers.tooling import tool
from butlers.validation import describe

NAME = SWITCHBOARD_MODULE
Seconds = Annotated[float, Field(gt=0, le=3600)]
# A Telegram user id (YAML may write it as a number).
TelegramId = Annotated[
    str,
    BeforeValidator(lambda v: str(v) if isinstance(v, int) else v),
    Field(pattern=r"^[0-9]{1,20}$"),
]
RetrySeconds = Annotated[float, Field(ge=0, le=3600)]
Address = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$", max_length=320)]


class OwnerConfig(ModuleConfig):
    """Who the owner is on each channel: only their messages start work; anyone
    else's are quarantined until the owner releases or drops them."""

    telegram: Annotated[list[TelegramId], Field(max_length=20)] = []
    email: Annotated[list[Address], Field(max_length=20)] = []


class SwitchboardConfig(ModuleConfig):
    classification_timeout_seconds: Seconds = 60.0
    route_timeout_seconds: Seconds = 600.0
    # A butler whose last heartbeat is older than this is shown as not alive.
    heartbeat_stale_seconds: Seconds = 90.0
    # How often unfinished messages no task is processing are resumed (also at start).
    recovery_interval_seconds: Seconds = 30.0
    # A registry entry whose heartbeat stopped this long ago is removed.
    registry_expiry_seconds: Annotated[float, Field(gt=0, le=30 * 24 * 3600)] = 3600.0
    # A target that is busy, unreachable or crashed mid-session is asked again (same
    # route key, back-off from 0.5 s doubling to 10 s) for at most this long.
    route_retry_seconds: RetrySeconds = 120.0
    # The same, for routes to the named butlers (e.g. fail fast for one that is often down).
    route_retry_seconds_by_butler: Annotated[
        dict[Annotated[str, Field(pattern=NAME_PATTERN)], RetrySeconds], Field(max_length=100)
    ] = {}
    owner: OwnerConfig = OwnerConfig()


def _validation_message(exc: ValidationError) -> str:
    return "invalid IngestEnvelopeV1: " + describe(exc.errors(), "(envelope)")


class SwitchboardModule(Module):
    name = NAME
    required = "every incoming message of the ecosystem is routed through it"
    config_model = SwitchboardConfig
    chain = migration_chain(NAME, __file__)
    # A classification session must not re-enter the pipeline, nor change where
    # messages go, nor decide on quarantined messages.
    session_hidden_tools = (
        "ingest_v1",
        "classify_message",
        "route",
        "message_release",
        "message_drop",
        *TRIAGE_WRITE_TOOLS,
    )

    def __init__(self) -> None:
        self._pipeline: Pipeline | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._relay: McpClient | None = None

    async def start(self, ctx: ModuleContext) -> None:
        config: SwitchboardConfig = ctx.config
        self._pipeline = Pipeline(
            butler=ctx.butler.name,
            store=SwitchboardStore(ctx.pool),
            triage=TriageStore(ctx.pool),
            clients=McpClient(
                _bearer(ctx.butler.token),
                timeout=config.route_timeout_seconds + 30,
                client_name=f"butlers-switchboard {ctx.butler.name}",
            ),
            spawner=ctx.services.spawner,
            classification_timeout=config.classification_timeout_seconds,
            route_timeout=config.route_timeout_seconds,
            stale_after=config.heartbeat_stale_seconds,
            recovery_interval=config.recovery_interval_seconds,
            owners=Owners.of({"telegram": config.owner.telegram, "email": config.owner.email}),
            retry_budget=config.route_retry_seconds,
            retry_budgets=config.route_retry_seconds_by_butler,
        )
        self._pipeline.start()
        self._relay = McpClient(
            _bearer(ctx.butler.token), client_name=f"butlers-switchboard {ctx.butler.name} relay"
        )
        self._expiry = asyncio.create_task(
            expire_stale_entries(SwitchboardStore(ctx.pool), config.registry_expiry_seconds),
            name="registry expiry",
        )

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        if self._pipeline is not None:
            await self._pipeline.aclose()
        if self._relay is not None:
            await self._relay.aclose()

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        pipeline = self._pipeline
        assert pipeline is not None
        store = SwitchboardStore(ctx.pool)
        config: SwitchboardConfig = ctx.config
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}
        pipeline_meta = meta | access_meta(sessions=False)  # no session re-enters the pipeline
        # Channel connectors (on the messenger) hand received messages in with their token.
        ingest_meta = meta | access_meta(sessions=False, connector=True)

        async def connector_refusal(envelope: IngestEnvelopeV1) -> str | None:
            """A butler's token hands over messages only for the channels it runs."""
            caller = current_caller()
            if caller.kind != "butler":
                return None
            row = next((r for r in await store.registry(1e9) if r.name == caller.name), None)
            allowed = channels_of(row.modules if row else [])
            if envelope.source.channel in allowed:
                return None
            return (
                f"{caller.label} may hand over messages only for the channel modules it runs "
                f"({', '.join(sorted(allowed)) or 'none registered'}), "
                f"not {envelope.source.channel!r}"
            )

        @tool(mcp, meta=ingest_meta)
        async def ingest_v1(
            envelope: Annotated[dict[str, AnyJson], Field(description="An IngestEnvelopeV1.")],
            wait: Annotated[
                bool, Field(description="Return only after classification and dispatch.")
            ] = False,
            route_timeout_seconds: Seconds | None = None,
            classification_timeout_seconds: Seconds | None = None,
        ) -> AnyJson:
            """Accept a message: persisted once per idempotency key (per caller), then
            classified and routed. The same key with different content is refused as a
            conflict.

            Returns {status: "accepted", request_id, duplicate}; with wait=true also the
            classification and one route result per target butler.
            """
            try:
                parsed = parse_envelope(envelope)
            except ValidationError as exc:
                raise ToolError(_validation_message(exc)) from None
            refused = await connector_refusal(parsed)
            if refused is not None:
                raise ToolError(refused)
            try:
                return await pipeline.ingest(
                    parsed,
                    wait=wait,
                    route_timeout=route_timeout_seconds,
                    classification_timeout=classification_timeout_seconds,
                    submitted_by=current_caller().label,
                    from_connector=current_caller().kind == "butler",
                )
            except IdempotencyConflict as exc:
                raise ToolError(str(exc)) from None

        @tool(mcp, meta=pipeline_meta)
        async def classify_message(
            text: Prompt,
        ) -> AnyJson:
            """Split a message into {butler, prompt, segment} entries (nothing is routed)."""
            return (await pipeline.classify(text)).to_json()

        @tool(mcp, meta=pipeline_meta)
        async def route(
            butler: Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS)],
            prompt: Prompt,
            timeout_seconds: Seconds | None = None,
        ) -> AnyJson:
            """Hand one prompt to a registered butler's `trigger`; logged in routing_log."""
            outcome = await pipeline.route(
                RouteEntry(butler, prompt, prompt), request_id=None, timeout=timeout_seconds
            )
            return outcome.to_json()

        @tool(mcp, meta=meta | access_meta(sessions=False, self_arg="butler"), annotations=read)
        async def route_confirm(
            route_id: uuid.UUID,
            butler: Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS)],
            prompt_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")],
        ) -> AnyJson:
            """Whether the switchboard is routing `route_id` to `butler` (the caller's own
            name) right now, with a prompt of this SHA-256: a target asks before it runs
            a session the switchboard's token asked for."""
            confirmed = pipeline.route_in_flight(route_id, butler, prompt_sha256)
            return {"route_id": str(route_id), "butler": butler, "confirmed": confirmed}

        register_registry_tools(mcp, store, meta)
        register_triage_tools(mcp, TriageStore(ctx.pool), pipeline, meta)
        assert self._relay is not None
        register_owner_tools(mcp, store, self._relay, meta)

        # Any butler's own token: the messenger derives the owner's destinations from it.
        @tool(mcp, meta=meta | access_meta(sessions=False, connector=True), annotations=read)
        async def owner_identity() -> AnyJson:
            """Who the owner is on each channel (`spec.modules.switchboard.owner`, the one
            place it is configured): Telegram user ids (also their private chat with the
            bot) and e-mail addresses."""
            return {"telegram": list(config.owner.telegram), "email": list(config.owner.email)}

        @tool(mcp, meta=meta, annotations=read)
        async def butler_registry_list() -> AnyJson:
            """Registered butlers with URL, hints, modules, last heartbeat and liveness."""
            rows = await store.registry(config.heartbeat_stale_seconds)
            return to_json(rows)

        @tool(mcp, meta=meta, annotations=read)
        async def routing_log_list(
            request_id: uuid.UUID | None = None, limit: Annotated[int, Field(ge=1, le=500)] = 50
        ) -> AnyJson:
            """Routing decisions and their outcomes, newest first."""
            return to_json(await store.routes(request_id, limit))

        @tool(mcp, meta=meta, annotations=read)
        async def switchboard_stats() -> AnyJson:
            """MCP sessions opened so far and kept now (`mcp_clients_*`), messages being
            processed, messages whose classification was unusable and routes asked
            again (a busy, unreachable or crashed target) since start."""
            return pipeline.stats()

        @tool(mcp, meta=pipeline_meta)
        async def message_release(request_id: uuid.UUID) -> AnyJson:
            """Let a quarantined message in (the owner vouches for it): it is classified
            and routed like the owner's own, and answered on its thread."""
            if not await pipeline.release(request_id):
                raise ToolError(f"message {request_id} is not quarantined; nothing released")
            return await _message(request_id)

        @tool(mcp, meta=pipeline_meta)
        async def message_drop(request_id: uuid.UUID) -> AnyJson:
            """Drop a quarantined message: kept as `dropped`, never processed."""
            if not await store.drop(request_id):
                raise ToolError(f"message {request_id} is not quarantined; nothing dropped")
            return await _message(request_id)

        @tool(mcp, meta=meta, annotations=read)
        async def quarantine_list(limit: Annotated[int, Field(ge=1, le=500)] = 50) -> AnyJson:
            """Messages from strangers waiting for the owner's release or drop, newest first."""
            return to_json(await store.quarantined(limit))

        async def _message(request_id: uuid.UUID) -> dict[str, AnyJson]:
            message = await store.message(request_id)
            if message is None:
                raise ToolError(f"no message with request_id {request_id}")
            routes = await store.routes(request_id, 100)
            return json_object(asdict(message)) | {"routes": to_json(routes)}

        @tool(mcp, meta=meta, annotations=read)
        async def message_get(request_id: uuid.UUID) -> AnyJson:
            """One ingested message with its status, classification, routes and reply."""
            return await _message(request_id)


def _bearer(token: str | None) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None
