"""Reminders on the dashboard: every butler's, and the owner cancelling one (audited)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


async def test_the_owner_sees_and_cancels_a_reminder_from_the_dashboard(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    text = f"dashboard reminder {uuid.uuid4().hex[:8]}"
    made = await butler_ecosystem.call("health", "remind", {"text": text, "after": "2h"})
    listed = data(await dashboard.get("/api/reminders", params={"status": "pending"}))
    [mine] = [r for r in listed if r["id"] == made["id"]]
    assert (mine["butler"], mine["text"], mine["created_by"]) == ("health", text, "user")
    cancelled = data(await dashboard.post(f"/api/butlers/health/reminders/{made['id']}/cancel"))
    assert (cancelled["status"], cancelled["butler"]) == ("cancelled", "health")
    assert cancelled["cancelled_by"].startswith("user")
    row = await butler_ecosystem.call("health", "reminder_get", {"reminder_id": made["id"]})
    assert row["status"] == "cancelled"
    again = await dashboard.post(f"/api/butlers/health/reminders/{made['id']}/cancel")
    assert again.status_code == 422 and "not pending" in again.text
    audit = data(await dashboard.get("/api/audit-log", params={"operation": "reminder.cancel"}))
    assert made["id"] in {entry["target"] for entry in audit}
