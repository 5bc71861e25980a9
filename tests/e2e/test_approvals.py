"""The approval gate over real MCP: a held `contact_delete` decided from another client."""

import asyncio
import time
from typing import Any

import httpx2 as httpx
import pytest

from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until
from tests.support.contracts import AUDIT_FIELDS
from tests.support.raw_mcp import headers, rpc

from .harness.ecosystem import EcosystemHandle
from .harness.env import APPROVAL_TIMEOUT_SECONDS
from .harness.golden import flow_golden
from .harness.normalize import Normalizer


async def _contact(handle: EcosystemHandle, name: str) -> str:
    return str((await handle.call("relationship", "contact_add", {"name": name}))["id"])


async def _pending_row(handle: EcosystemHandle, contact_id: str) -> dict[str, Any]:
    """The pending approval for this contact, read from the table (deadline-bound)."""
    pool = await handle.pool("relationship")
    row = await wait_until(
        lambda: pool.fetchrow(
            "SELECT * FROM approvals WHERE status = 'pending' AND tool_args->>'contact_id' = $1",
            contact_id,
        ),
        timeout=10,
        interval=0.02,
        message=f"no pending approval for contact {contact_id}",
    )
    return dict(row)


async def _status_is(pool: Any, approval_id: Any, status: str) -> bool:
    return bool(
        await pool.fetchval("SELECT status FROM approvals WHERE id = $1", approval_id) == status
    )


async def _contact_exists(handle: EcosystemHandle, contact_id: str) -> bool:
    pool = await handle.pool("relationship")
    return bool(
        await pool.fetchval("SELECT count(*) FROM contacts WHERE id = $1::uuid", contact_id)
    )


async def _decide(handle: EcosystemHandle, approval_id: Any, decision: str, **extra: Any) -> Any:
    async with handle.client("relationship") as operator:
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
        "user:e2e",
        "cleanup",
    )
    assert decided["decided_at"] >= decided["requested_at"]
    listed = await butler_ecosystem.call("relationship", "approval_list", {"status": "approved"})
    assert str(row["id"]) in {r["id"] for r in listed}


async def test_gated_call_from_a_session_is_audited_with_that_session(
    butler_ecosystem: EcosystemHandle, llm_script: Script, update_golden: bool
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

    pool = await butler_ecosystem.pool("relationship")
    approval = await pool.fetchrow("SELECT * FROM approvals WHERE id = $1", row["id"])
    session_row = await pool.fetchrow(
        "SELECT * FROM sessions WHERE session_id = $1::uuid", result["session_id"]
    )
    normalizer = Normalizer()
    normalizer.register(result["session_id"], "SESSION_ID")
    normalizer.register(contact_id, "CONTACT_ID")
    problems = flow_golden(
        "approval-gated-session",
        "test_gated_call_from_a_session_is_audited_with_that_session",
        {
            "01_trigger_result.json": result,
            "02_approval.json": dict(approval),
            "03_session.json": dict(session_row),
        },
        normalizer,
        update=update_golden,
    )
    assert not problems, "\n\n".join(problems)


# -- who may decide, and when ----------------------------------------------------------


async def test_only_the_user_token_decides(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    contact_id = await _contact(eco, "Decided By The User Only")
    call = asyncio.create_task(
        eco.call_raw("relationship", "contact_delete", {"contact_id": contact_id})
    )
    row = await _pending_row(eco, contact_id)
    # The switchboard's token gets in (it may route here) but may not decide; another
    # butler's token is not even let in.
    async with eco.client("relationship", token=eco.butler_tokens["switchboard"]) as router:
        result = await router.call_tool(
            "approval_decide",
            {"approval_id": str(row["id"]), "decision": "approve", "decided_by": "user"},
            raise_on_error=False,
        )
    assert result.is_error and "approval_decide" in result.content[0].text
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(
            eco["relationship"].url,
            json=rpc("tools/call", {"name": "approval_decide", "arguments": {}}),
            headers=headers(eco.butler_tokens["health"]),
        )
    assert refused.status_code == 401
    pool = await eco.pool("relationship")
    assert await pool.fetchval("SELECT status FROM approvals WHERE id = $1", row["id"]) == "pending"
    await _decide(eco, row["id"], "deny")
    assert (await asyncio.wait_for(call, 10)).is_error


async def test_decided_by_is_the_authenticated_identity(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    contact_id = await _contact(eco, "Who Decided")
    call = asyncio.create_task(
        eco.call_raw("relationship", "contact_delete", {"contact_id": contact_id})
    )
    row = await _pending_row(eco, contact_id)
    decided = await _decide(eco, row["id"], "deny", decided_by="the-health-butler")
    await asyncio.wait_for(call, 10)
    assert decided["decided_by"].split(":")[0] == "user", decided["decided_by"]


async def test_a_decision_after_the_caller_went_away_is_refused(
    butler_ecosystem: EcosystemHandle,
) -> None:
    eco = butler_ecosystem
    contact_id = await _contact(eco, "Caller Went Away")
    async with eco.client("relationship") as client:
        held = asyncio.create_task(client.call_tool("contact_delete", {"contact_id": contact_id}))
        row = await _pending_row(eco, contact_id)
        held.cancel()
    pool = await eco.pool("relationship")
    deadline = time.monotonic() + 5
    while await pool.fetchval("SELECT status FROM approvals WHERE id = $1", row["id"]) == "pending":
        assert time.monotonic() < deadline, "the request stayed pending after its caller left"
        await asyncio.sleep(0.02)
    async with eco.client("relationship") as user:
        late = await user.call_tool(
            "approval_decide",
            {"approval_id": str(row["id"]), "decision": "approve", "decided_by": "e2e"},
            raise_on_error=False,
        )
    assert late.is_error and "expired" in late.content[0].text
    assert await _contact_exists(eco, contact_id)


async def test_a_request_past_its_deadline_cannot_be_decided(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """As left behind by a butler that died while holding the call."""
    eco = butler_ecosystem
    pool = await eco.pool("relationship")
    approval_id = await pool.fetchval(
        "INSERT INTO approvals (tool_name, tool_args, expires_at) "
        "VALUES ('contact_delete', '{}'::jsonb, clock_timestamp() - interval '1 second') "
        "RETURNING id"
    )
    result = await eco.call_raw(
        "relationship",
        "approval_decide",
        {"approval_id": str(approval_id), "decision": "approve", "decided_by": "e2e"},
    )
    assert result.is_error and "expired" in result.content[0].text
    assert (
        await pool.fetchval("SELECT status FROM approvals WHERE id = $1", approval_id) == "expired"
    )


@pytest.mark.parametrize(
    "arguments",
    [{"contact_id": 12345}, {"contact_id": ["a"]}, {}],
    ids=["int", "list", "missing"],
)
async def test_junk_arguments_are_refused_before_anything_is_held(
    butler_ecosystem: EcosystemHandle, arguments: dict[str, Any]
) -> None:
    eco = butler_ecosystem
    pool = await eco.pool("relationship")
    before = await pool.fetchval("SELECT count(*) FROM approvals")
    started = time.monotonic()
    result = await eco.call_raw("relationship", "contact_delete", arguments)
    assert result.is_error
    assert time.monotonic() - started < APPROVAL_TIMEOUT_SECONDS / 2, "the junk call was held"
    assert await pool.fetchval("SELECT count(*) FROM approvals") == before


async def test_a_held_call_does_not_block_the_butlers_other_sessions(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    eco = butler_ecosystem
    contact_id = await _contact(eco, "Held In A Session")
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_delete", "arguments": {"contact_id": contact_id}}]),
    )
    first = asyncio.create_task(eco.call("relationship", "trigger", {"prompt": "delete it"}))
    row = await _pending_row(eco, contact_id)
    llm_script.route("relationship", step("second session done"))
    second = await asyncio.wait_for(
        eco.call("relationship", "trigger", {"prompt": "anything else?"}),
        APPROVAL_TIMEOUT_SECONDS / 2,
    )
    assert second["success"] and second["output"] == "second session done"
    pool = await eco.pool("relationship")
    assert await pool.fetchval("SELECT status FROM approvals WHERE id = $1", row["id"]) == "pending"
    llm_script.route("relationship", step("the delete was denied"))
    await _decide(eco, row["id"], "deny")
    assert (await asyncio.wait_for(first, 10))["success"]


async def test_clearing_an_email_needs_approval(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    added = await eco.call(
        "relationship", "contact_add", {"name": "Keep My Email", "email": "keep@example.org"}
    )
    contact_id = str(added["id"])
    call = asyncio.create_task(
        eco.call_raw("relationship", "contact_update", {"contact_id": contact_id, "email": ""})
    )
    row = await _pending_row(eco, contact_id)
    assert row["tool_name"] == "contact_update"
    await _decide(eco, row["id"], "deny")
    assert (await asyncio.wait_for(call, 10)).is_error
    pool = await eco.pool("relationship")
    email = await pool.fetchval("SELECT email FROM contacts WHERE id = $1::uuid", contact_id)
    assert email == "keep@example.org"


async def test_cancelling_a_session_whose_call_is_held_expires_the_request(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    eco = butler_ecosystem
    contact_id = await _contact(eco, "Held Then Cancelled")
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_delete", "arguments": {"contact_id": contact_id}}]),
    )
    first = asyncio.create_task(eco.call("relationship", "trigger", {"prompt": "delete it"}))
    row = await _pending_row(eco, contact_id)
    cancelled = await eco.call("relationship", "session_cancel", {"session_id": row["session_id"]})
    assert cancelled["status"] == "cancelled"
    result = await asyncio.wait_for(first, 10)
    assert result["success"] is False and result["error"].startswith("cancelled by ")
    pool = await eco.pool("relationship")
    # The held call's end writes `expired` as the cancellation reaches it (under load a
    # moment after the trigger has answered).
    await wait_until(
        lambda: _status_is(pool, row["id"], "expired"),
        timeout=10,
        interval=0.05,
        message=f"approval {row['id']} not expired after the session was cancelled",
    )
    assert await _contact_exists(eco, contact_id)
    late = await eco.call_raw(
        "relationship", "approval_decide", {"approval_id": str(row["id"]), "decision": "approve"}
    )
    assert late.is_error
