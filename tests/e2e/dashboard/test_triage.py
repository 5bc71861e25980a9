"""E-mail triage rules and thread affinity, edited through the dashboard API and applied
by the switchboard before classification (the classifier is never asked)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

from butlers.testing.script_server import Script, step

from ..harness.ecosystem import EcosystemHandle
from ..test_switchboard_flow import classify_as

RULES = "/api/switchboard/triage-rules"
AFFINITY = "/api/switchboard/thread-affinity"


async def mail(
    handle: EcosystemHandle,
    text: str,
    sender: str,
    *,
    thread: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An e-mail as the IMAP connector hands it over (CONV point 2), waited for."""
    message_id = f"<{uuid.uuid4().hex}@mail.example>"
    envelope = {
        "schema_version": "ingest.v1",
        "source": {"channel": "email", "provider": "imap", "endpoint_identity": "me@home"},
        "event": {
            "external_event_id": message_id,
            "external_thread_id": thread or message_id,
            "observed_at": datetime.now(UTC).isoformat(),
        },
        "sender": {"identity": sender},
        "payload": {
            "text": text,
            "raw": {"reply": {"subject": text[:40]}, "headers": headers or {}},
        },
    }
    return await handle.call("switchboard", "ingest_v1", {"envelope": envelope, "wait": True})


async def created(dashboard: httpx.AsyncClient, rule: dict[str, Any]) -> dict[str, Any]:
    response = await dashboard.post(RULES, json=rule)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


async def dry_run(dashboard: httpx.AsyncClient, **message: Any) -> dict[str, Any]:
    response = await dashboard.post(RULES + "/test", json=message)
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


async def test_rules_route_or_ignore_before_classification(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    tag = uuid.uuid4().hex[:8]
    clinic, lists = f"clinic-{tag}.example", f"<news-{tag}.example>"
    route = await created(
        dashboard,
        {
            "name": f"clinic {tag}",
            "match": {"domain": clinic},
            "action": "route",
            "butler": "health",
        },
    )
    ignore = await created(
        dashboard, {"name": f"news {tag}", "match": {"list_id": lists}, "action": "ignore"}
    )
    try:
        listed = (await dashboard.get(RULES)).json()["data"]
        assert {route["id"], ignore["id"]} <= {r["id"] for r in listed}
        assert (await dry_run(dashboard, sender=f"dr@lab.{clinic}"))["butler"] == "health"
        assert (await dry_run(dashboard, sender="x@y.example", list_id=lists))["action"] == "ignore"

        llm_script.route("health", step("Filed the lab results."))
        routed = await mail(butler_ecosystem, f"Your lab results {tag}", f"dr@lab.{clinic}")
        assert [(r["butler"], r["status"]) for r in routed["routes"]] == [("health", "success")]
        assert routed["triage"]["rule_name"] == f"clinic {tag}"
        ignored = await mail(
            butler_ecosystem, f"Deals {tag}", "shop@x.example", headers={"List-Id": lists}
        )
        assert (ignored["fanout_status"], ignored["routes"]) == ("ignored", [])
        assert llm_script.requests_for("switchboard") == [], "the classifier was asked"
        pool = await butler_ecosystem.pool("switchboard")
        status = await pool.fetchval(
            "SELECT status FROM message_inbox WHERE request_id = $1::uuid", ignored["request_id"]
        )
        assert status == "ignored"

        off = await dashboard.patch(f"{RULES}/{route['id']}", json={"enabled": False})
        assert off.status_code == 200 and off.json()["data"]["enabled"] is False, off.text
        assert (await dry_run(dashboard, sender=f"dr@{clinic}"))["action"] == "classify"
        bad = await dashboard.post(
            RULES, json={"name": f"x {tag}", "match": {"sender": "a@b"}, "action": "route",
                         "butler": "nobody"},
        )  # fmt: skip
        assert bad.status_code == 422 and "no butler 'nobody'" in bad.text
    finally:
        for rule in (route, ignore):
            deleted = await dashboard.delete(f"{RULES}/{rule['id']}")
            assert deleted.json()["data"]["deleted"] is True


async def test_a_reply_goes_to_the_butler_that_handled_its_thread(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    tag = uuid.uuid4().hex[:8]
    sender = f"ann-{tag}@friends.example"
    first = f"Ann's birthday is May 3 ({tag})"
    llm_script.route("switchboard", classify_as(("relationship", first, first)))
    llm_script.route("relationship", step("Noted."), step("Noted the gift idea."))
    started = await mail(butler_ecosystem, first, sender)
    thread = started["routes"][0]["butler"], started
    assert thread[0] == "relationship"
    root = await (await butler_ecosystem.pool("switchboard")).fetchval(
        "SELECT envelope->'event'->>'external_thread_id' FROM message_inbox "
        "WHERE request_id = $1::uuid",
        started["request_id"],
    )
    reply = await mail(butler_ecosystem, f"She'd like a book ({tag})", sender, thread=root)
    assert [r["butler"] for r in reply["routes"]] == ["relationship"]
    assert reply["triage"]["action"] == "affinity"
    assert len(llm_script.requests_for("switchboard")) == 1, "the reply was classified"
    assert (await dry_run(dashboard, sender=sender, thread_id=root))["butler"] == "relationship"

    override = f"{AFFINITY}/overrides/{quote(root, safe='')}"
    pinned = await dashboard.put(override, json={"butler": "general"})
    assert pinned.status_code == 200 and pinned.json()["data"]["pinned"] is True, pinned.text
    settings = (await dashboard.get(AFFINITY)).json()["data"]
    assert root in [o["thread_id"] for o in settings["overrides"]]
    assert (await dry_run(dashboard, sender=sender, thread_id=root))["butler"] == "general"
    unpinned = await dashboard.delete(override)
    assert unpinned.json()["data"]["removed"] is True
    assert (await dry_run(dashboard, sender=sender, thread_id=root))["action"] == "classify"
