"""The approval gate: held calls, decisions, expiry, conditional policies, spec overrides."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from butlers.modules.approvals.store import ApprovalStore
from butlers.waiting import wait_until
from tests.support.contracts import AUDIT_FIELDS
from tests.support.proxy import DroppingProxy

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


@pytest.fixture
async def db_proxy(pg_admin_dsn: str) -> AsyncIterator[DroppingProxy]:
    """A proxy in front of PostgreSQL: `cut()` takes the database away, `restore()`."""
    server = urlsplit(pg_admin_dsn)
    proxy = DroppingProxy(server.hostname or "127.0.0.1", server.port or 5432)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.aclose()


async def _admin_status(pg_admin_dsn: str, butler: ModuleButler, approval_id: str) -> str:
    """The row's status read beside the butler (its own pool may be cut off)."""
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        return str(
            await conn.fetchval(
                f'SELECT status FROM "{butler.context.schema}".approvals WHERE id = $1',
                uuid.UUID(approval_id),
            )
        )
    finally:
        await conn.close()


async def test_a_call_held_while_the_database_died_ends_expired_and_cannot_be_approved(
    module_butler: ButlerFactory, db_proxy: DroppingProxy, pg_admin_dsn: str
) -> None:
    butler = await module_butler(RELATIONSHIP, approval_timeout=2.0, db_port=db_proxy.port)
    contact = await butler.call("contact_add", {"name": "Eve"})
    call = asyncio.create_task(butler.call_raw("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    db_proxy.cut()
    result = await asyncio.wait_for(call, 20)
    assert result.is_error and "database could not be reached" in result.content[0].text
    db_proxy.restore()

    # Once the database is back the request is expired, not left pending forever.
    async def expired() -> bool:
        return await _admin_status(pg_admin_dsn, butler, row["id"]) == "expired"

    await wait_until(expired, timeout=30, interval=0.1, message="the request stayed pending")
    decided = await butler.call_raw(
        "approval_decide", {"approval_id": row["id"], "decision": "approve", "decided_by": "me"}
    )
    assert decided.is_error and "expired" in decided.content[0].text
    assert len(await butler.call("contact_search", {"query": "Eve"})) == 1


async def test_a_call_held_through_a_short_outage_resumes_and_runs_when_approved(
    module_butler: ButlerFactory, db_proxy: DroppingProxy
) -> None:
    butler = await module_butler(RELATIONSHIP, approval_timeout=60.0, db_port=db_proxy.port)
    contact = await butler.call("contact_add", {"name": "Fay"})
    call = asyncio.create_task(butler.call_raw("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    db_proxy.cut()
    # The held call keeps polling while the database is away...
    await wait_until(lambda: db_proxy.refused >= 3, timeout=20, interval=0.05)
    assert not call.done(), "the held call gave up at the first failed read"
    db_proxy.restore()
    # ...and a decision taken once it is back reaches it.
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approve", "decided_by": "me"}
    )
    result = await asyncio.wait_for(call, 20)
    assert not result.is_error, result.content[0].text
    assert await butler.call("contact_search", {"query": "Fay"}) == []


async def test_approving_a_pending_request_no_call_waits_for_expires_it(
    module_butler: ButlerFactory,
) -> None:
    """A pending row whose call is gone (it gave up, its process changed): approving
    it must not record `approved` for a call that will never run."""
    butler = await module_butler(RELATIONSHIP)
    store = ApprovalStore(butler.context.pool)
    approval_id = await store.request("contact_delete", {"contact_id": "x"}, None, 600)
    decided = await butler.call_raw(
        "approval_decide", {"approval_id": str(approval_id), "decision": "approve"}
    )
    assert decided.is_error and "no call is waiting" in decided.content[0].text
    row = await store.get(approval_id)
    assert row is not None and row.status == "expired"
