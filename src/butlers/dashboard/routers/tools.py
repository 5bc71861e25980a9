"""Acting on a butler through its MCP tools: list and call tools, trigger, tick."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, JsonValue

from butlers.dashboard.context import Ctx, actor
from butlers.dashboard.envelopes import ApiResponse, ok

router = APIRouter(tags=["tools"])
TRIGGER_TIMEOUT = 3900.0  # the longest session a spec allows, plus margin


class ToolInfo(BaseModel):
    name: str
    description: str
    module: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    approval_mode: str | None
    sensitive_args: list[str]


class MCPToolCallRequest(BaseModel):
    tool_name: Annotated[str, Field(min_length=1, max_length=200)]
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class MCPToolCallResponse(BaseModel):
    tool_name: str
    result: JsonValue
    is_error: bool
    raw_text: str


class TriggerRequest(BaseModel):
    prompt: Annotated[str, Field(min_length=1, max_length=100_000)]
    context: JsonValue = None
    timeout_seconds: Annotated[float | None, Field(gt=0, le=3600)] = None


class TriggerResult(BaseModel):
    session_id: str
    success: bool
    output: str | None
    error: str | None
    duration_ms: int
    tool_calls: list[dict[str, Any]]
    input_tokens: int | None
    output_tokens: int | None
    model: str | None
    trigger_source: str
    cost_usd: float | None


class TickResult(BaseModel):
    ran: list[dict[str, Any]]


@router.get("/api/butlers/{name}/mcp/tools", response_model=ApiResponse[list[ToolInfo]])
async def list_tools(name: str, dashboard: Ctx) -> dict[str, Any]:
    """The butler's MCP tools with their input schema and approval policy."""
    info = dashboard.butler(name)
    tools = await dashboard.clients.list_tools(info)
    result = []
    for tool in sorted(tools, key=lambda t: str(t.get("name"))):
        meta = dict(tool.get("_meta") or {})
        result.append(
            ToolInfo(
                name=str(tool.get("name")),
                description=str(tool.get("description") or ""),
                module=meta.get("module"),
                input_schema=dict(tool.get("inputSchema") or {}),
                annotations=dict(tool.get("annotations") or {}),
                approval_mode=meta.get("approval_mode"),
                sensitive_args=list(meta.get("sensitive_args") or []),
            )
        )
    return ok(result)


@router.post("/api/butlers/{name}/mcp/call", response_model=ApiResponse[MCPToolCallResponse])
async def call_tool(
    name: str, body: MCPToolCallRequest, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Call any tool of the butler (audited). A tool error comes back with `is_error`."""
    info = dashboard.butler(name)
    outcome = await dashboard.clients.call_raw(
        info, body.tool_name, dict(body.arguments), timeout=TRIGGER_TIMEOUT
    )
    await dashboard.audit.record(
        actor=actor(request),
        butler=name,
        operation="mcp.call",
        target=body.tool_name,
        request={"tool": body.tool_name, "arguments": body.arguments},
        ok=not outcome.is_error,
        error=outcome.text if outcome.is_error else None,
        client=request.client.host if request.client else None,
    )
    return ok(
        MCPToolCallResponse(
            tool_name=body.tool_name,
            result=outcome.data,
            is_error=outcome.is_error,
            raw_text=outcome.text,
        )
    )


@router.post("/api/butlers/{name}/trigger", response_model=ApiResponse[TriggerResult])
async def trigger(name: str, body: TriggerRequest, request: Request, dashboard: Ctx) -> Any:
    """Run one LLM session of the butler now (waits for it to finish)."""
    info = dashboard.butler(name)
    arguments: dict[str, Any] = {"prompt": body.prompt, "trigger_source": "dashboard"}
    if body.context is not None:
        arguments["context"] = body.context
    if body.timeout_seconds is not None:
        arguments["timeout_seconds"] = body.timeout_seconds
    outcome = await dashboard.write(
        request, info, "trigger", "trigger", arguments, timeout=TRIGGER_TIMEOUT
    )
    return ok(TriggerResult.model_validate(outcome.data))


@router.post("/api/butlers/{name}/tick", response_model=ApiResponse[TickResult])
async def tick(name: str, request: Request, dashboard: Ctx) -> Any:
    """Run every scheduled task of the butler that is due now."""
    info = dashboard.butler(name)
    outcome = await dashboard.write(request, info, "tick", "tick", {}, timeout=TRIGGER_TIMEOUT)
    return ok(TickResult.model_validate(outcome.data))
