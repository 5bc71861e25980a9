"""The owner switches a butler's module off and on from the dashboard: the butler's own
tool list (over its MCP endpoint) loses the module's tools and gets them back, module
states say who switched it, refusals name why, the write is audited."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle
from .test_endpoints import data
from .test_errors import error_of

TOGGLE = "/api/butlers/health/module-states/{}/enabled"


async def _tools(ecosystem: EcosystemHandle, butler: str) -> dict[str, str]:
    """The butler's tools as its MCP endpoint lists them, each with its module."""
    async with ecosystem.client(butler) as client:
        return {t.name: str((t.meta or {}).get("module")) for t in await client.list_tools()}


def _states(response: httpx.Response) -> dict[str, Any]:
    return {s["name"]: s for s in data(response)}


async def test_a_switched_off_module_loses_its_tools_until_switched_on(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    before = await _tools(butler_ecosystem, "health")
    health_tools = {name for name, module in before.items() if module == "health"}
    assert "measurement_log" in health_tools, before
    states = _states(await dashboard.get("/api/butlers/health/module-states"))
    assert (states["health"]["enabled"], states["health"]["source"]) == (True, "spec")
    assert states["health"]["toggleable"] is True
    try:
        off = data(await dashboard.put(TOGGLE.format("health"), json={"enabled": False}))
        assert (off["enabled"], off["source"], off["status"]) == (False, "runtime", "disabled")
        assert off["disabled_by"] and off["disabled_at"]
        after = await _tools(butler_ecosystem, "health")
        assert set(after) == set(before) - health_tools, "the module's tools go, no other"
        states = _states(await dashboard.get("/api/butlers/health/module-states"))
        assert (states["health"]["enabled"], states["health"]["source"]) == (False, "runtime")
        status = await butler_ecosystem.call("health", "status")
        [reported] = [m for m in status["modules"] if m["name"] == "health"]
        assert reported["status"] == "disabled"
        butlers = {b["name"]: b for b in data(await dashboard.get("/api/butlers"))}
        assert butlers["health"]["status"] != "degraded", "switched off is not a fault"
    finally:
        on = data(await dashboard.put(TOGGLE.format("health"), json={"enabled": True}))
    assert (on["enabled"], on["source"], on["status"]) == (True, "spec", "active")
    assert await _tools(butler_ecosystem, "health") == before
    states = _states(await dashboard.get("/api/butlers/health/module-states"))
    assert (states["health"]["enabled"], states["health"]["disabled_by"]) == (True, None)
    audit = data(await dashboard.get("/api/audit-log", params={"butler": "health"}))
    operations = [e["operation"] for e in audit if e["target"] == "health"]
    assert {"module.disable", "module.enable"} <= set(operations)


async def test_a_switch_the_butler_refuses_names_why(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.put(
        "/api/butlers/relationship/module-states/approvals/enabled", json={"enabled": False}
    )
    error = error_of(response, 422, "TOOL_ERROR")
    assert "contacts" in str(error["message"]) and error["butler"] == "relationship"
    states = _states(await dashboard.get("/api/butlers/relationship/module-states"))
    assert states["approvals"]["enabled"] is True and states["approvals"]["required"]
    assert states["approvals"]["toggleable"] is False
    error = error_of(
        await dashboard.put(TOGGLE.format("contacts"), json={"enabled": False}), 404, "NOT_FOUND"
    )
    assert "spec.modules" in str(error["message"])
    error_of(
        await dashboard.put(TOGGLE.format("health"), json={"on": False}), 400, "VALIDATION_ERROR"
    )
