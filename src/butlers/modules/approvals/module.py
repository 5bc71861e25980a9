"""The `approvals` module's MCP-facing class: its config, tools and lifecycle."""

import logging
import uuid
from typing import Annotated, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.auth.middleware import current_caller
from butlers.jsonutil import AnyJson, to_json
from butlers.llm.offer import ON_REQUEST
from butlers.modules.approvals.gate import NOT_HELD, ApprovalGate
from butlers.modules.approvals.proposals import carry_out, register_proposal_tools
from butlers.modules.approvals.store import ApprovalStore
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta
from butlers.tooling import tool

log = logging.getLogger(__name__)
NAME = "approvals"


class ApprovalsModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)
    # Housekeeping for people (the dashboard, a client), not for a session's model.
    session_hidden_tools = ("approval_expire_stale",)
    required = (
        "it is the owner's approval gate: without it gated tools and held sends would not "
        "wait for the owner"
    )
    session_tools = ON_REQUEST  # any butler's: what waits for the owner, proposals

    def __init__(self) -> None:
        self.gate: ApprovalGate | None = None

    async def start(self, ctx: ModuleContext) -> None:
        spec = ctx.butler.resource.spec.approvals
        timeout = ctx.butler.approval_timeout_seconds or spec.timeout_seconds
        self.store = ApprovalStore(ctx.pool)
        expired = await self.store.expire_orphans()
        if expired:
            log.warning(
                "expired %d approval request(s) whose held call died with its process", expired
            )
        services = ctx.services
        self.gate = ApprovalGate(self.store, timeout, services.redactor, spawner=services.spawner)
        services.approver = self.gate

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = self.store
        assert self.gate is not None
        mcp.add_middleware(self.gate)
        meta = tool_meta(NAME)

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def approval_list(
            status: Literal["pending", "approved", "denied", "expired"] | None = "pending",
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> AnyJson:
            """Approval requests, newest first (pending ones by default)."""
            return to_json(await store.list(status, limit))

        @tool(mcp, meta=meta | access_meta(sessions=False))
        async def approval_decide(
            approval_id: uuid.UUID,
            decision: Literal["approved", "denied", "approve", "deny"],
            decided_by: Annotated[
                str | None,
                Field(
                    min_length=1,
                    max_length=200,
                    description="Who, for the record (e.g. a dashboard user); kept after "
                    "the authenticated identity, which is what decides.",
                ),
            ] = None,
            reason: Annotated[str | None, Field(max_length=2000)] = None,
        ) -> AnyJson:
            """Approve (the held call runs) or deny (the caller gets an error) a pending
            request. Needs the user's token; a request past its deadline, or whose caller
            went away, is expired and can no longer be decided."""
            status = "approved" if decision.startswith("approve") else "denied"
            identity = current_caller()
            recorded = identity.label + (f":{decided_by}" if decided_by else "")
            gate = self.gate
            assert gate is not None
            proposal = await store.is_proposal(approval_id)
            if (
                not proposal
                and not gate.holds(approval_id)
                and await store.expire(approval_id, NOT_HELD)
            ):
                # Pending, but its call is gone (e.g. it gave up while the database was
                # away): a decision would be recorded for a call that never runs.
                raise ToolError(
                    f"approval {approval_id}: {NOT_HELD}; it is now expired, ask for the call again"
                )
            row = await store.decide(approval_id, status, recorded, reason)
            if row is None:
                current = await store.get(approval_id)
                if current is None:
                    raise ToolError(f"no approval {approval_id} on this butler")
                raise ToolError(
                    f"approval {approval_id} is {current.status}, not pending"
                    + (f" ({current.reason})" if current.reason else "")
                    + "; only pending requests can be decided"
                )
            if row.status == "expired":
                raise ToolError(
                    f"approval {approval_id} expired at {row.expires_at.isoformat()} "
                    "before this decision; nothing was done"
                )
            if proposal:
                log.info("proposal %s %s by %s", approval_id, status, identity.label)
                if status == "approved":
                    return await carry_out(mcp, store, row)
                return to_json(row)
            if not await gate.deliver(approval_id, status):
                await store.not_run(approval_id, f"{status} by {recorded}, but {NOT_HELD}")
                raise ToolError(
                    f"approval {approval_id} was {status}, but {NOT_HELD}; it is now expired"
                )
            log.info("approval %s %s by %s", approval_id, status, identity.label)
            return to_json(row)

        register_proposal_tools(mcp, store, meta)

        @tool(mcp, meta=meta)
        async def approval_expire_stale() -> AnyJson:
            """Expire pending requests past their deadline whose held call is gone."""
            expired = await store.expire_stale()
            return {"expired": [str(i) for i in expired]}

    async def ready(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        assert self.gate is not None
        await self.gate.refresh(mcp, ctx.butler.resource.spec.approvals)

    async def tools_changed(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        await self.ready(mcp, ctx)  # a module's gated tools came or went

    async def stop(self) -> None:
        if self.gate is not None:
            await self.gate.aclose()
