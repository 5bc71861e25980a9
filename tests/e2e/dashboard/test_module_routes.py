"""Module routers read only the butlers that enable their module."""

from __future__ import annotations

import uuid

import httpx2 as httpx

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, step

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


async def test_messages_whose_classification_was_unusable_are_shown_with_the_reason(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    text = f"unclassifiable {uuid.uuid4().hex[:6]}"
    llm_script.route("switchboard", step("I think this is about the weather."))
    llm_script.route("general", step("Noted."))
    envelope = build_envelope(text).model_dump(mode="json")
    answer = await butler_ecosystem.call(
        "switchboard", "ingest_v1", {"envelope": envelope, "wait": True}
    )
    assert answer["classification"]["fallback"] is True
    listed = (await dashboard.get("/api/switchboard/messages", params={"fallback": "true"})).json()
    (mine,) = [m for m in listed["data"] if m["text"] == text]
    assert mine["fallback"] is True
    assert (
        "the classifier answered 'I think this is about the weather.'"
        in (mine["classification_reason"])
    )
    others = (await dashboard.get("/api/switchboard/messages", params={"fallback": "false"})).json()
    assert text not in {m["text"] for m in others["data"]}
    stats = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert stats["classification_fallbacks"] >= 1
