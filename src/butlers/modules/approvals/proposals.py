"""Proposals: what a session may ask for but never do itself, held for the owner.

An LLM session may not create schedules (a schedule spends money again and again on
its own). It may propose one: `schedule_propose` validates the schedule and records
it as a pending approval of kind `proposal` holding the `schedule_create` call it
would be. Nothing waits on it: the session goes on, and when the owner approves
(`approval_decide`, the dashboard's approvals page), that call runs with the owner's
authority; denied or left past `PROPOSAL_TTL` it never runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.middleware import current_caller
from butlers.jsonutil import AnyJson, Prompt, to_json
from butlers.modules.approvals.store import Approval, ApprovalStore
from butlers.scheduling.jobs import JobRegistry
from butlers.scheduling.validation import ScheduleError, validate_schedule
from butlers.spec import SCHEDULE_NAME_PATTERN
from butlers.tooling import tool

PROPOSAL_TTL = 7 * 24 * 3600.0  # seconds a proposal waits for the owner
MAX_PENDING_PROPOSALS = 20
PROPOSED_TOOL = "schedule_create"


def register_proposal_tools(mcp: FastMCP, store: ApprovalStore, meta: dict[str, Any]) -> None:
    @tool(mcp, meta=meta)
    async def schedule_propose(
        name: Annotated[str, Field(pattern=SCHEDULE_NAME_PATTERN)],
        cron: Annotated[str, Field(max_length=200, description="Five-field cron, UTC.")],
        prompt: Prompt,
    ) -> AnyJson:
        """Propose a recurring prompt (e.g. every Sunday at 18:00 UTC, '0 18 * * 0': ask
        the owner how the week went). It becomes a schedule only when the owner
        approves; returns the pending approval. Proposals expire after 7 days."""
        arguments = {"name": name, "cron": cron, "prompt": prompt}
        try:
            validate_schedule(arguments, JobRegistry(), source="proposal")
        except ScheduleError as exc:
            raise ToolError(str(exc)) from None
        caller = current_caller()
        approval_id = await store.propose(
            PROPOSED_TOOL,
            arguments,
            caller.name if caller.kind == "session" else None,
            PROPOSAL_TTL,
            MAX_PENDING_PROPOSALS,
        )
        if approval_id is None:
            raise ToolError(
                f"{MAX_PENDING_PROPOSALS} proposals already wait for the owner; "
                "no more until they are decided"
            )
        return to_json(await store.get(approval_id))


async def carry_out(mcp: FastMCP, store: ApprovalStore, row: Approval) -> AnyJson:
    """Run an approved proposal's call (as whoever approved it: the owner). A call that
    fails leaves the proposal `expired` with the reason, and raises it."""
    arguments = row.tool_args if isinstance(row.tool_args, dict) else {}
    try:
        result = await mcp.call_tool(row.tool_name, dict(arguments))
    except Exception as exc:
        reason = f"approved, but {row.tool_name} failed: {exc}"
        await store.not_run(row.id, reason)
        raise ToolError(f"approval {row.id} {reason}") from None
    data = result.structured_content
    if isinstance(data, dict) and set(data) == {"result"}:
        data = data["result"]
    return {"approval": to_json(row), "result": to_json(data)}
