"""The approval gate: held calls, decisions, expiry, conditional policies, spec overrides."""

import asyncio
import time
from typing import Any

from tests.support.contracts import AUDIT_FIELDS

from .conftest import ButlerFactory, ModuleButler

RELATIONSHIP = {"approvals": {}, "contacts": {}}


async def _pending(butler: ModuleButler, tool: str, within: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        rows = await butler.call("approval_list", {"status": "pending"})
        for row in rows:
            if row["tool_name"] == tool:
                return row  # type: ignore[no-any-return]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no pending approval for {tool} within {within} s")


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
    contact = await butler.call("contact_add", {"name": "Eve"})
    renamed = await butler.call("contact_update", {"contact_id": contact["id"], "name": "Evelyn"})
    assert renamed["name"] == "Evelyn"
    blank = await butler.call(
        "contact_update", {"contact_id": contact["id"], "name": "Eve", "email": ""}
    )
    assert blank["name"] == "Eve"
    gated = await butler.call_raw(
        "contact_update", {"contact_id": contact["id"], "email": "eve@example.org"}
    )
    assert gated.is_error and "approval" in gated.content[0].text
    assert [r["tool_name"] for r in await butler.call("approval_list", {"status": None})] == [
        "contact_update"
    ]


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
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "approved",
        "ops",
        "ok",
    )
