"""A session proposes a recurring prompt; it becomes a schedule only when the owner
approves."""

from typing import Any

import pytest
from fastmcp.exceptions import ToolError

from butlers.auth.identity import current_identity, session
from butlers.modules.approvals.store import ApprovalStore

from .conftest import ButlerFactory, ModuleButler

WEEKLY = {"name": "weekly-review", "cron": "0 18 * * 0", "prompt": "Ask how the week went."}


async def _as_session(butler: ModuleButler, tool: str, arguments: dict[str, Any]) -> Any:
    token = current_identity.set(session("00000000-0000-0000-0000-0000000000aa"))
    try:
        result = (await butler.built.server.call_tool(tool, arguments)).structured_content
    finally:
        current_identity.reset(token)
    return result.get("result", result) if isinstance(result, dict) else result


async def _schedules(butler: ModuleButler) -> set[str]:
    return {s["name"] for s in await butler.call("schedule_list")}


async def test_a_proposed_schedule_exists_only_once_the_owner_approves(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"approvals": {}})
    with pytest.raises(ToolError, match="not available to an LLM session"):
        await _as_session(butler, "schedule_create", WEEKLY)
    proposal = await _as_session(butler, "schedule_propose", WEEKLY)
    assert (proposal["status"], proposal["tool_name"]) == ("pending", "schedule_create")
    assert "weekly-review" not in await _schedules(butler)
    # A restart expires held calls, not proposals: nothing holds a proposal.
    assert await ApprovalStore(butler.context.pool).expire_orphans() == 0
    decided = await butler.call(
        "approval_decide", {"approval_id": proposal["id"], "decision": "approve"}
    )
    assert decided["approval"]["status"] == "approved"
    assert decided["result"]["prompt"] == WEEKLY["prompt"]
    assert "weekly-review" in await _schedules(butler)


async def test_a_denied_or_invalid_proposal_never_becomes_a_schedule(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"approvals": {}})
    proposal = await _as_session(butler, "schedule_propose", WEEKLY)
    await butler.call("approval_decide", {"approval_id": proposal["id"], "decision": "deny"})
    assert "weekly-review" not in await _schedules(butler)
    with pytest.raises(ToolError, match="cron"):
        await _as_session(butler, "schedule_propose", WEEKLY | {"cron": "every sunday"})
