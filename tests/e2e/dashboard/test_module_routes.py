"""Module routers read only the butlers that enable their module."""

from __future__ import annotations

import uuid

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle


async def test_module_tables_are_listed_from_the_butlers_that_have_them(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    name = f"Module Route {uuid.uuid4().hex[:6]}"
    contact = await butler_ecosystem.call("relationship", "contact_add", {"name": name})
    await butler_ecosystem.call(
        "health", "measurement_log", {"type": "heart_rate", "value": 61, "unit": "bpm"}
    )
    found = (await dashboard.get("/api/contacts", params={"q": name})).json()
    assert [(c["butler"], c["id"]) for c in found["data"]] == [("relationship", contact["id"])]
    assert found["meta"] | {"failed_butlers": []} == found["meta"]
    detail = (await dashboard.get(f"/api/contacts/relationship/{contact['id']}")).json()["data"]
    assert detail["name"] == name and detail["notes"] == []
    rates = (await dashboard.get("/api/health/measurements", params={"type": "heart_rate"})).json()
    assert rates["data"][0]["butler"] == "health" and rates["data"][0]["value"] == 61
    registry = (await dashboard.get("/api/switchboard/registry")).json()["data"]
    assert {e["name"] for e in registry} == set(butler_ecosystem.names)
    assert all(e["alive"] and e["butler"] == "switchboard" for e in registry)
