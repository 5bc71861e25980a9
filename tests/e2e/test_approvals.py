"""The approval gate over real MCP: a held `contact_delete` decided from another client."""

import asyncio
import time
from typing import Any

from fastmcp import Client

from butlers.testing.script_server import Script, step
from tests.support.contracts import AUDIT_FIELDS

from .harness.ecosystem import EcosystemHandle
from .harness.env import APPROVAL_TIMEOUT_SECONDS


async def _contact(handle: EcosystemHandle, name: str) -> str:
    return str((await handle.call("relationship", "contact_add", {"name": name}))["id"])


async def _pending_row(handle: EcosystemHandle, contact_id: str) -> dict[str, Any]:
    """The pending approval for this contact, read from the table (deadline-bound)."""
    pool = await handle.pool("relationship")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = await pool.fetchrow(
            "SELECT * FROM approvals WHERE status = 'pending' AND tool_args->>'contact_id' = $1",
            contact_id,
        )
        if row is not None:
            return dict(row)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no pending approval for contact {contact_id}")


async def _contact_exists(handle: EcosystemHandle, contact_id: str) -> bool:
    pool = await handle.pool("relationship")
    return bool(
        await pool.fetchval("SELECT count(*) FROM contacts WHERE id = $1::uuid", contact_id)
    )


async def _decide(handle: EcosystemHandle, approval_id: Any, decision: str, **extra: Any) -> Any:
    async with Client(handle["relationship"].url) as operator:
        result = await operator.call_tool(
            "approval_decide",
            {"approval_id": str(approval_id), "decision": decision, "decided_by": "e2e", **extra},
        )
    return result.data


async def test_gated_delete_is_held_then_runs_when_approved(
    butler_ecosystem: EcosystemHandle,
) -> None:
    contact_id = await _contact(butler_ecosystem, "Approve Me")
    call = asyncio.create_task(
        butler_ecosystem.call("relationship", "contact_delete", {"contact_id": contact_id})
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    assert row["tool_name"] == "contact_delete" and row["tool_args"] == {"contact_id": contact_id}
    assert await _contact_exists(butler_ecosystem, contact_id), "held call must not run"
    assert not call.done()
    await _decide(butler_ecosystem, row["id"], "approved")
    assert await asyncio.wait_for(call, 10) == {"contact_id": contact_id, "deleted": True}
    assert not await _contact_exists(butler_ecosystem, contact_id)


async def test_denied_delete_errors_and_keeps_the_contact(
    butler_ecosystem: EcosystemHandle,
) -> None:
    contact_id = await _contact(butler_ecosystem, "Deny Me")
    call = asyncio.create_task(
        butler_ecosystem.call_raw("relationship", "contact_delete", {"contact_id": contact_id})
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    await _decide(butler_ecosystem, row["id"], "denied", reason="keep her")
    result = await asyncio.wait_for(call, 10)
    assert result.is_error
    assert "denied" in result.content[0].text and "keep her" in result.content[0].text
    assert await _contact_exists(butler_ecosystem, contact_id)


async def test_undecided_delete_expires_with_an_error(butler_ecosystem: EcosystemHandle) -> None:
    contact_id = await _contact(butler_ecosystem, "Forget Me")
    started = time.monotonic()
    result = await butler_ecosystem.call_raw(
        "relationship", "contact_delete", {"contact_id": contact_id}
    )
    assert time.monotonic() - started >= APPROVAL_TIMEOUT_SECONDS * 0.9
    assert result.is_error and "expired" in result.content[0].text
    pool = await butler_ecosystem.pool("relationship")
    status = await pool.fetchval(
        "SELECT status FROM approvals WHERE tool_args->>'contact_id' = $1", contact_id
    )
    assert status == "expired"
    assert await _contact_exists(butler_ecosystem, contact_id)


async def test_conditional_update_is_gated_only_with_a_sensitive_argument(
    butler_ecosystem: EcosystemHandle,
) -> None:
    contact_id = await _contact(butler_ecosystem, "Conditional")
    renamed = await butler_ecosystem.call(
        "relationship", "contact_update", {"contact_id": contact_id, "name": "Renamed"}
    )
    assert renamed["name"] == "Renamed"
    call = asyncio.create_task(
        butler_ecosystem.call_raw(
            "relationship", "contact_update", {"contact_id": contact_id, "email": "x@example.org"}
        )
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    assert row["tool_name"] == "contact_update"
    await _decide(butler_ecosystem, row["id"], "denied")
    assert (await asyncio.wait_for(call, 10)).is_error
    pool = await butler_ecosystem.pool("relationship")
    assert await pool.fetchval("SELECT email FROM contacts WHERE id = $1::uuid", contact_id) is None


async def test_approval_rows_keep_the_audit_trail(butler_ecosystem: EcosystemHandle) -> None:
    contact_id = await _contact(butler_ecosystem, "Audited")
    call = asyncio.create_task(
        butler_ecosystem.call("relationship", "contact_delete", {"contact_id": contact_id})
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    assert set(row) >= set(AUDIT_FIELDS)
    assert row["session_id"] and row["decided_at"] is None
    decided = await _decide(butler_ecosystem, row["id"], "approve", reason="cleanup")
    await asyncio.wait_for(call, 10)
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "approved",
        "e2e",
        "cleanup",
    )
    assert decided["decided_at"] >= decided["requested_at"]
    listed = await butler_ecosystem.call("relationship", "approval_list", {"status": "approved"})
    assert str(row["id"]) in {r["id"] for r in listed}


async def test_gated_call_from_a_session_is_audited_with_that_session(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    contact_id = await _contact(butler_ecosystem, "Gated From Session")
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_delete", "arguments": {"contact_id": contact_id}}]),
        step("Deleted."),
    )
    session = asyncio.create_task(
        butler_ecosystem.call("relationship", "trigger", {"prompt": "Delete that contact"})
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    await _decide(butler_ecosystem, row["id"], "approve")
    result = await session
    assert result["success"] is True
    assert str(row["session_id"]) == result["session_id"]
    assert not await _contact_exists(butler_ecosystem, contact_id)
