"""The owner's runtime module switch (`module_set_enabled`) on a butler with a database:
tools, sessions' tools, background work, jobs, the approval gate, and the override
kept across a restart."""

import asyncio

import pytest

from butlers.daemon.butler import build_butler
from butlers.scheduling.jobs import UnknownJob
from butlers.stores.modules import disabled_modules
from tests.support.butlers import UNUSED_MCP_URL, make_resource, make_settings

from .conftest import ButlerFactory, ModuleButler
from .test_approvals import _pending

MODULES = {"approvals": {}, "contacts": {}, "memory": {}, "reminders": {}}


def _memory_tools(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("memory_")}


async def _switch(butler: ModuleButler, module: str, enabled: bool) -> dict[str, object]:
    state: dict[str, object] = await butler.call(
        "module_set_enabled", {"module": module, "enabled": enabled}
    )
    return state


async def test_a_module_switched_off_loses_its_tools_jobs_and_loops_and_comes_back(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler(MODULES)
    memory = _memory_tools(await butler.tool_names())
    for_sessions = _memory_tools(butler.context.access.session_tools())
    # Deleting, sharing and consolidating on demand are the owner's; memory_stats is the
    # owner's view.
    owners = {
        "memory_delete",
        "memory_share",
        "memory_receive_shared",
        "memory_withdraw_shared",
        "memory_consolidate_now",
        "memory_stats",
    }
    assert for_sessions and for_sessions == memory - owners
    reminders = butler.built.modules.instance("reminders")
    assert reminders is not None and reminders[0].loop is not None  # type: ignore[attr-defined]

    state = await _switch(butler, "memory", False)
    assert (state["status"], state["source"], state["disabled_by"]) == (
        "disabled",
        "runtime",
        "local",
    )
    assert not _memory_tools(await butler.tool_names())
    assert not _memory_tools(butler.context.access.session_tools())
    assert butler.module("memory")["status"] == "disabled"
    with pytest.raises(UnknownJob, match="is off: module memory is disabled"):
        butler.services.jobs.get("memory_consolidate")
    assert set(await disabled_modules(butler.context.pool)) == {"memory"}
    refused = await butler.call_raw("memory_store_fact", {})
    assert refused.is_error

    await _switch(butler, "reminders", False)
    assert reminders[0].loop is None, "the delivery loop of a switched-off module stops"  # type: ignore[attr-defined]
    assert butler.built.modules.instance("reminders") is None

    state = await _switch(butler, "memory", True)
    assert (state["status"], state["source"]) == ("active", "spec")
    assert _memory_tools(await butler.tool_names()) == memory
    assert _memory_tools(butler.context.access.session_tools()) == for_sessions
    assert butler.services.jobs.get("memory_consolidate")
    assert set(await disabled_modules(butler.context.pool)) == {"reminders"}
    await _switch(butler, "reminders", True)
    again = butler.built.modules.instance("reminders")
    assert again is not None and again[0].loop is not None  # type: ignore[attr-defined]


async def test_required_modules_and_dependencies_are_refused_with_the_reason(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"approvals": {}, "contacts": {}})
    refused = await butler.call_raw("module_set_enabled", {"module": "approvals", "enabled": False})
    assert refused.is_error and "contacts depends on it" in refused.content[0].text
    await _switch(butler, "contacts", False)
    refused = await butler.call_raw("module_set_enabled", {"module": "approvals", "enabled": False})
    assert refused.is_error and "approvals is required" in refused.content[0].text
    refused = await butler.call_raw("module_set_enabled", {"module": "health", "enabled": False})
    assert refused.is_error and "not in spec.modules" in refused.content[0].text
    assert butler.module("approvals")["status"] == "active"

    broken = await module_butler({"approvals": {"noSuchOption": True}, "contacts": {}})
    await _switch(broken, "contacts", False)
    refused = await broken.call_raw("module_set_enabled", {"module": "contacts", "enabled": True})
    assert refused.is_error and "needs approvals (failed)" in refused.content[0].text


async def test_a_gated_tool_switched_back_on_is_gated_again(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"approvals": {}, "contacts": {}})
    contact = await butler.call("contact_add", {"name": "Ann"})
    await _switch(butler, "contacts", False)
    await _switch(butler, "contacts", True)
    call = asyncio.create_task(butler.call("contact_delete", {"contact_id": contact["id"]}))
    row = await _pending(butler, "contact_delete")
    assert await butler.call("contact_search", {"query": "Ann"}), "held call must not run yet"
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "denied", "decided_by": "me"}
    )
    await asyncio.gather(call, return_exceptions=True)


async def test_the_override_is_kept_across_a_restart(module_butler: ButlerFactory) -> None:
    butler = await module_butler(MODULES)
    await _switch(butler, "memory", False)
    resource = make_resource(
        "probe",
        description="test butler",
        modules=MODULES,
        schedules=[{"name": "consolidate", "cron": "0 3 * * *", "job": "memory_consolidate"}],
    )
    context = butler.context
    restarted = await build_butler(
        resource, context.pool, make_settings(), schema=context.schema, mcp_url=UNUSED_MCP_URL
    )
    try:
        state = next(m for m in restarted.context.modules if m.name == "memory")
        assert (state.status, state.disabled_by) == ("disabled", "local")
        tools = {t.name for t in await restarted.server.list_tools()}
        assert not _memory_tools(tools) and "contact_add" in tools
        with pytest.raises(UnknownJob, match="is off"):
            restarted.services.jobs.get("memory_consolidate")
    finally:
        await restarted.aclose()
