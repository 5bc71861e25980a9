"""`approvals`: gated tool calls wait for a human decision, with an audit trail."""

import uuid
from typing import Annotated, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue

from butlers.jsonutil import to_json
from butlers.modules.approvals.gate import ApprovalGate
from butlers.modules.approvals.store import ApprovalStore
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta

NAME = "approvals"


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ToolError(f"approval_id {value!r} is not a UUID") from None


class ApprovalsModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)
    # Housekeeping for people (the dashboard, a client), not for a session's model.
    session_hidden_tools = ("approval_expire_stale",)

    def __init__(self) -> None:
        self.gate: ApprovalGate | None = None

    async def start(self, ctx: ModuleContext) -> None:
        spec = ctx.butler.resource.spec.approvals
        timeout = ctx.butler.approval_timeout_seconds or spec.timeout_seconds
        self.store = ApprovalStore(ctx.pool)
        self.gate = ApprovalGate(self.store, timeout)
        ctx.services["approval_gate"] = self.gate

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = self.store
        assert self.gate is not None
        mcp.add_middleware(self.gate)
        meta = tool_meta(NAME)

        @mcp.tool(meta=meta, annotations={"readOnlyHint": True})
        async def approval_list(
            status: Literal["pending", "approved", "denied", "expired"] | None = "pending",
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> JsonValue:
            """Approval requests, newest first (pending ones by default)."""
            return to_json(await store.list(status, limit))  # type: ignore[no-any-return]

        @mcp.tool(meta=meta)
        async def approval_decide(
            approval_id: str,
            decision: Literal["approved", "denied", "approve", "deny"],
            decided_by: Annotated[str, Field(min_length=1, max_length=200)],
            reason: str | None = None,
        ) -> JsonValue:
            """Approve (the held call runs) or deny (the caller gets an error) a pending request."""
            key = _uuid(approval_id)
            status = "approved" if decision.startswith("approve") else "denied"
            row = await store.decide(key, status, decided_by, reason)
            if row is None:
                current = await store.get(key)
                if current is None:
                    raise ToolError(f"no approval {approval_id} on this butler")
                raise ToolError(
                    f"approval {approval_id} is {current['status']}, not pending; "
                    "only pending requests can be decided"
                )
            return to_json(row)  # type: ignore[no-any-return]

        @mcp.tool(meta=meta)
        async def approval_expire_stale() -> JsonValue:
            """Expire pending requests past their deadline whose held call is gone."""
            expired = await store.expire_stale()
            return {"expired": [str(i) for i in expired]}

    async def ready(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        assert self.gate is not None
        await self.gate.refresh(mcp, ctx.butler.resource.spec.approvals)
