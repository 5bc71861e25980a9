"""The approval gate: held calls, decisions, expiry, conditional policies, spec overrides."""

import asyncio
from typing import Any

from butlers.waiting import wait_until
from tests.support.contracts import AUDIT_FIELDS

from .conftest import ButlerFactory, ModuleButler

RELATIONSHIP = {"approvals": {}, "contacts": {}}


async def _pending(butler: ModuleButler, tool: str, within: float = 10.0) -> dict[str, Any]:
    async def pending() -> dict[str, Any] | None:
        rows = await butler.call("approval_list", {"status": "pending"})
        return next((row for row in rows if row["tool_name"] == tool), None)

    return await wait_until(
        pending,
        timeout=within,
        interval=0.02,
        message=f"no pending approval for {tool} within {within} s",
    )


async def test_approved_delete_runs_with_the_original_arguments(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler(RELATIONSHIP)
    contact = await butler.call("contact_add", {"name": "Ann"})
    call = asyncio.create_task(butler.call("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    assert row["tool_args"] == {"contact_id": contact["id"]}
    assert await butler.call("contact_search", {"query": "Ann"}), "held call must not run yet"
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approved", "decided_by": "me"}
    )
    assert await asyncio.wait_for(call, 10) == {"contact_id": contact["id"], "deleted": True}
    assert await butler.call("contact_search", {"query": "Ann"}) == []


async def test_denied_delete_returns_an_error_and_keeps_the_contact(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler(RELATIONSHIP)
    contact = await butler.call("contact_add", {"name": "Bob"})
    call = asyncio.create_task(butler.call_raw("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    await butler.call(
        "approval_decide",
        {"approval_id": row["id"], "decision": "denied", "decided_by": "me", "reason": "no"},
    )
    result = await asyncio.wait_for(call, 10)
    assert result.is_error
    assert "denied" in result.content[0].text
    assert len(await butler.call("contact_search", {"query": "Bob"})) == 1


async def test_undecided_request_expires_with_an_error(module_butler: ButlerFactory) -> None:
    butler = await module_butler(RELATIONSHIP, approval_timeout=0.3)
    contact = await butler.call("contact_add", {"name": "Cy"})
    result = await butler.call_raw("contact_delete", {"contact_id": contact["id"]})
    assert result.is_error and "expired" in result.content[0].text
    [row] = await butler.call("approval_list", {"status": "expired"})
    assert row["decided_by"] == "system" and row["decided_at"] is not None
    assert len(await butler.call("contact_search", {"query": "Cy"})) == 1


async def test_deciding_an_expired_request_is_refused(module_butler: ButlerFactory) -> None:
    butler = await module_butler(RELATIONSHIP, approval_timeout=0.2)
    contact = await butler.call("contact_add", {"name": "Di"})
    await butler.call_raw("contact_delete", {"contact_id": contact["id"]})
    [row] = await butler.call("approval_list", {"status": "expired"})
    result = await butler.call_raw(
        "approval_decide", {"approval_id": row["id"], "decision": "approve", "decided_by": "me"}
    )
    assert result.is_error and "expired" in result.content[0].text


async def test_conditional_update_is_gated_only_for_sensitive_arguments(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler(RELATIONSHIP, approval_timeout=0.2)
    contact = await butler.call("contact_add", {"name": "Eve", "email": "eve@example.org"})
    renamed = await butler.call("contact_update", {"contact_id": contact["id"], "name": "Evelyn"})
    assert renamed["name"] == "Evelyn"
    omitted = await butler.call(
        "contact_update", {"contact_id": contact["id"], "name": "Eve", "email": None}
    )
    assert omitted["email"] == "eve@example.org"
    for email in ("eve@elsewhere.example", ""):  # a new address, or none at all
        gated = await butler.call_raw(
            "contact_update", {"contact_id": contact["id"], "email": email}
        )
        assert gated.is_error and "approval" in gated.content[0].text
    assert [r["tool_name"] for r in await butler.call("approval_list", {"status": None})] == [
        "contact_update",
        "contact_update",
    ]
    row = await butler.call("contact_get", {"contact_id": contact["id"]})
    assert row["email"] == "eve@example.org"


async def test_spec_rule_overrides_a_tools_declared_mode(module_butler: ButlerFactory) -> None:
    butler = await module_butler(
        RELATIONSHIP, approvals={"rules": [{"tool": "contact_delete", "mode": "never"}]}
    )
    contact = await butler.call("contact_add", {"name": "Flo"})
    assert (await butler.call("contact_delete", {"contact_id": contact["id"]}))["deleted"]


async def test_spec_rule_can_gate_an_ungated_tool(module_butler: ButlerFactory) -> None:
    butler = await module_butler(
        {"approvals": {}, "health": {}},
        approvals={"rules": [{"tool": "measurement_log", "mode": "always"}]},
        approval_timeout=0.2,
    )
    result = await butler.call_raw("measurement_log", {"type": "weight", "value": 80})
    assert result.is_error and "expired" in result.content[0].text
    assert await butler.call("measurement_list", {}) == []


async def test_audit_row_has_every_field(module_butler: ButlerFactory) -> None:
    butler = await module_butler(RELATIONSHIP)
    contact = await butler.call("contact_add", {"name": "Gus"})
    call = asyncio.create_task(butler.call("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    decided = await butler.call(
        "approval_decide",
        {"approval_id": row["id"], "decision": "approve", "decided_by": "ops", "reason": "ok"},
    )
    await asyncio.wait_for(call, 10)
    assert set(decided) >= set(AUDIT_FIELDS)
    # The butler's own code decided (in process): its identity, then the given name.
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "approved",
        "local:ops",
        "ok",
    )


async def test_approval_row_masks_credentials_but_the_approved_call_gets_them(
    module_butler: ButlerFactory,
) -> None:
    """The approval row follows the butler's one redaction policy; the held call does not."""
    butler = await module_butler(
        {"approvals": {}}, approvals={"rules": [{"tool": "state_set", "mode": "always"}]}
    )
    login = {"user": "ann", "password": "hunter2-correct-horse"}
    call = asyncio.create_task(butler.call("state_set", {"key": "login", "value": login}))
    row = await _pending(butler, "state_set")
    assert row["tool_args"] == {"key": "login", "value": {"user": "ann", "password": "[REDACTED]"}}
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approved", "decided_by": "me"}
    )
    await asyncio.wait_for(call, 10)
    assert await butler.call("state_get", {"key": "login"}) == login
    stored = await butler.call("approval_list", {"status": "approved"})
    assert "hunter2-correct-horse" not in str(stored)
