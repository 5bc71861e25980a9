"""State and schedules: read by SQL, written through the butler's tools, audited."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import httpx2 as httpx
import pytest

from ..harness.ecosystem import EcosystemHandle

VALUES: list[tuple[str, Any]] = [
    ("null", None),
    ("nested", {"a": [1, 2.5, {"b": None, "c": [True, False]}], "d": {"e": {"f": "g"}}}),
    ("unicode", {"text": "héllo wörld ✓ 日本語 🚀", "emoji": "👩‍👩‍👧"}),
    ("slashes/in/key", ["a", "b"]),
    ("spaces and % and ?#", "x"),
    ("ключ/ü", 0),
    ("trailing/", {"ok": True}),
    ("empty-containers", {"list": [], "object": {}, "string": ""}),
]


def path(butler: str, key: str) -> str:
    return f"/api/butlers/{butler}/state/{quote(key, safe='')}"


@pytest.mark.parametrize(("label", "value"), VALUES, ids=[v[0] for v in VALUES])
async def test_state_written_by_the_dashboard_equals_state_get_over_mcp(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, label: str, value: Any
) -> None:
    key = f"fidelity/{uuid.uuid4().hex[:8]}/{label}"
    written = await dashboard.put(path("general", key), json={"value": value})
    assert written.status_code == 200, written.text
    assert written.json()["data"]["key"] == key
    over_mcp = await butler_ecosystem.call("general", "state_get", {"key": key})
    read = (await dashboard.get(path("general", key))).json()["data"]
    assert read["key"] == key
    assert read["value"] == over_mcp == value


async def test_state_written_over_mcp_reads_back_the_same_through_the_dashboard(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    prefix = f"mcp/{uuid.uuid4().hex[:8]}/"
    for label, value in VALUES:
        await butler_ecosystem.call("health", "state_set", {"key": prefix + label, "value": value})
    listed = (await dashboard.get("/api/butlers/health/state", params={"prefix": prefix})).json()
    assert listed["meta"]["total"] == len(VALUES)
    by_key = {e["key"]: e["value"] for e in listed["data"]}
    assert by_key == {prefix + label: value for label, value in VALUES}
    over_mcp = await butler_ecosystem.call("health", "state_list", {"prefix": prefix})
    assert by_key == {e["key"]: e["value"] for e in over_mcp}


async def test_state_delete_and_missing_keys(dashboard: httpx.AsyncClient) -> None:
    key = f"delete-me/{uuid.uuid4().hex[:8]}"
    assert (await dashboard.put(path("general", key), json={"value": 1})).status_code == 200
    assert (await dashboard.delete(path("general", key))).json()["data"]["deleted"] is True
    assert (await dashboard.get(path("general", key))).status_code == 404
    missing = await dashboard.delete(path("general", key))
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "NOT_FOUND")
    audit = (await dashboard.get("/api/audit-log", params={"operation": "state.delete"})).json()
    assert [e["target"] for e in audit["data"][:2]] == [key, key]
    assert [e["status"] for e in audit["data"][:2]] == ["ok", "ok"]


async def test_schedule_create_update_toggle_delete(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    name = f"dash-{uuid.uuid4().hex[:8]}"
    created = await dashboard.post(
        "/api/butlers/general/schedules",
        json={"name": name, "cron": "0 9 * * 1", "prompt": "Weekly review"},
    )
    assert created.status_code == 201, created.text
    schedule = created.json()["data"]
    assert (schedule["name"], schedule["cron"], schedule["enabled"], schedule["source"]) == (
        name,
        "0 9 * * 1",
        True,
        "runtime",
    )
    duplicate = await dashboard.post(
        "/api/butlers/general/schedules", json={"name": name, "cron": "0 9 * * 1", "prompt": "x"}
    )
    assert duplicate.json()["error"]["code"] == "TOOL_ERROR"
    updated = await dashboard.put(
        f"/api/butlers/general/schedules/{schedule['id']}",
        json={"cron": "30 7 * * *", "prompt": "Daily review"},
    )
    assert (updated.json()["data"]["cron"], updated.json()["data"]["prompt"]) == (
        "30 7 * * *",
        "Daily review",
    )
    toggled = await dashboard.patch(f"/api/butlers/general/schedules/{name}/toggle")
    assert toggled.json()["data"]["enabled"] is False
    explicit = await dashboard.patch(
        f"/api/butlers/general/schedules/{name}/toggle", json={"enabled": True}
    )
    assert explicit.json()["data"]["enabled"] is True
    over_mcp = {s["name"]: s for s in await butler_ecosystem.call("general", "schedule_list")}
    listed = {
        s["name"]: s for s in (await dashboard.get("/api/butlers/general/schedules")).json()["data"]
    }
    assert listed[name]["cron"] == over_mcp[name]["cron"] == "30 7 * * *"
    assert listed[name]["enabled"] is over_mcp[name]["enabled"] is True
    deleted = await dashboard.delete(f"/api/butlers/general/schedules/{schedule['id']}")
    assert deleted.json()["data"] == {"name": name, "deleted": True}
    assert name not in {s["name"] for s in await butler_ecosystem.call("general", "schedule_list")}
    gone = await dashboard.delete(f"/api/butlers/general/schedules/{name}")
    assert gone.json()["error"]["code"] == "NOT_FOUND"
    audit = (await dashboard.get("/api/audit-log", params={"butler": "general"})).json()["data"]
    operations = [e["operation"] for e in audit if e["target"] == name]
    assert operations[:5] == [
        "schedule.delete",
        "schedule.toggle",
        "schedule.toggle",
        "schedule.update",
        "schedule.create",
    ]
