"""The SSE stream: headers, live events from the butlers' change hints, replay,
keepalive, cleanup on disconnect, and recovery when the LISTEN connection dies."""

from __future__ import annotations

import asyncio
import time
import uuid
from urllib.parse import urlsplit

import httpx2 as httpx

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, step

from ..harness.ecosystem import EcosystemHandle
from .conftest import sse


async def _create_schedule(dashboard: httpx.AsyncClient, name: str) -> dict[str, object]:
    response = await dashboard.post(
        "/api/butlers/health/schedules", json={"name": name, "cron": "0 4 * * *", "prompt": "x"}
    )
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


async def test_the_stream_opens_with_connected_and_the_seed_headers(
    dashboard: httpx.AsyncClient,
) -> None:
    async with dashboard.stream("GET", "/api/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["connection"] == "keep-alive"
        lines = response.aiter_lines()
        first = [await anext(lines) for _ in range(4)]
    assert first == ["retry: 2000", "", "event: connected", 'data: {"status":"ok"}']


async def test_a_session_is_evented_at_start_and_end(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    llm_script.route("general", step("Done.", delay=0.3))
    async with sse(dashboard) as events:
        mark = len(events.events)
        result = await dashboard.post("/api/butlers/general/trigger", json={"prompt": "Say done"})
        session_id = result.json()["data"]["session_id"]
        start = await events.wait_for(
            lambda e: e.type == "session_start" and e.data["session_id"] == session_id, after=mark
        )
        end = await events.wait_for(
            lambda e: e.type == "session_end" and e.data["session_id"] == session_id, after=mark
        )
    assert start.data["butler"] == "general" and start.data["trigger_source"] == "dashboard"
    assert end.data["status"] == "completed" and int(end.id or 0) > int(start.id or 0)


async def test_a_message_is_evented_when_accepted_and_done(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    llm_script.route(
        "switchboard", step('[{"butler": "general", "prompt": "hi", "segment": "hi"}]')
    )
    llm_script.route("general", step("Hello."))
    envelope = build_envelope("hi there", channel="telegram", provider="telegram")
    async with sse(dashboard) as events:
        mark = len(events.events)
        accepted = await butler_ecosystem.call(
            "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
        )
        request_id = accepted["request_id"]
        kinds = []
        for kind in ("message_accepted", "message_done"):
            event = await events.wait_for(
                lambda e, k=kind: e.type == k and e.data["request_id"] == request_id, after=mark
            )
            kinds.append((event.type, event.data["butler"]))
    assert kinds == [("message_accepted", "switchboard"), ("message_done", "switchboard")]


async def test_one_message_publishes_its_whole_event_sequence_once(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    """Everything the stream says about one message routed to one butler: the message
    accepted, classified and done, the classifier's session and the target's session
    started and ended; each exactly once, in the order of its own life, all on the
    message's trace. (Re-reads of different tables run side by side, so only events of
    one row, or of batches apart, have a fixed order across rows.)"""
    llm_script.route(
        "switchboard", step('[{"butler": "general", "prompt": "note it", "segment": "note"}]')
    )
    llm_script.route("general", step("Noted.", delay=0.2))
    envelope = build_envelope(
        "note that the plants need water", channel="telegram", provider="telegram"
    )
    async with sse(dashboard) as events:
        mark = len(events.events)
        accepted = await butler_ecosystem.call(
            "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
        )
        request_id = accepted["request_id"]
        done = await events.wait_for(
            lambda e: e.type == "message_done" and e.data["request_id"] == request_id, after=mark
        )
        trace_id = done.data["trace_id"]
        await events.wait_for(
            lambda e: (
                e.type == "session_end"
                and e.data["butler"] == "general"
                and e.data["trace_id"] == trace_id
            ),
            after=mark,
        )
        await asyncio.sleep(1.0)  # anything published twice, or late, is in by now
        ours = [
            e
            for e in events.events[mark:]
            if e.data.get("trace_id") == trace_id or e.data.get("request_id") == request_id
        ]
    ids = [int(e.id or 0) for e in ours]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids

    def life(butler: str, types: tuple[str, ...], **fields: str) -> list[str]:
        return [
            e.type
            for e in ours
            if e.type in types
            and e.data["butler"] == butler
            and all(e.data.get(k) == v for k, v in fields.items())
        ]

    message = ("message_accepted", "message_classified", "message_done")
    sessions = ("session_start", "session_end")
    classify = f"classify:{request_id}"
    assert life("switchboard", message, request_id=request_id) == list(message)
    assert life("switchboard", sessions, trigger_source=classify) == list(sessions)
    assert life("general", sessions) == list(sessions)
    assert sorted((e.type, e.data["butler"]) for e in ours) == sorted(
        [
            ("message_accepted", "switchboard"),
            ("message_classified", "switchboard"),
            ("message_done", "switchboard"),
            ("session_start", "switchboard"),
            ("session_end", "switchboard"),
            ("session_start", "general"),
            ("session_end", "general"),
        ]
    ), [(e.type, e.data) for e in ours]
    target_end = next(e for e in ours if e.type == "session_end" and e.data["butler"] == "general")
    assert target_end.data["status"] == "completed" and done.data["status"] == "dispatched"
    assert all(e.data["trace_id"] == trace_id for e in ours)


async def test_a_reconnect_replays_what_was_missed(dashboard: httpx.AsyncClient) -> None:
    first, second = f"replay-a-{uuid.uuid4().hex[:6]}", f"replay-b-{uuid.uuid4().hex[:6]}"
    async with sse(dashboard) as events:
        mark = len(events.events)
        schedule = await _create_schedule(dashboard, first)
        seen = await events.wait_for(
            lambda e: e.type == "schedule_changed" and e.data["id"] == schedule["id"], after=mark
        )
    other = await _create_schedule(dashboard, second)  # while disconnected
    await dashboard.delete(f"/api/butlers/health/schedules/{schedule['id']}")
    async with sse(dashboard, last_event_id=seen.id) as events:
        created = await events.wait_for(
            lambda e: e.type == "schedule_changed" and e.data["id"] == other["id"]
        )
        deleted = await events.wait_for(
            lambda e: (
                e.type == "schedule_changed"
                and e.data.get("deleted")
                and e.data["id"] == schedule["id"]
            )
        )
        replayed_ids = [int(e.id) for e in events.events if e.id]
        assert int(seen.id or 0) not in replayed_ids, "the last seen event is not sent again"
        assert replayed_ids == sorted(replayed_ids)
        assert int(created.id or 0) < int(deleted.id or 0)
    async with sse(dashboard, last_event_id="1") as stale:
        await stale.wait_for(lambda e: e.type == "resync", timeout=5)
    await dashboard.delete(f"/api/butlers/health/schedules/{other['id']}")


async def test_an_idle_stream_gets_keepalives(dashboard: httpx.AsyncClient) -> None:
    async with sse(dashboard) as events:
        deadline = time.monotonic() + 10  # the e2e dashboard sends one after 1 s idle
        while not events.comments:
            assert time.monotonic() < deadline, "no keepalive within 10 s"
            events.arrived.clear()
            await asyncio.wait_for(events.arrived.wait(), 10)


async def _subscribers(dashboard: httpx.AsyncClient) -> int:
    return int((await dashboard.get("/api/health")).json()["data"]["sse_subscribers"])


async def test_a_disconnected_client_is_cleaned_up(dashboard: httpx.AsyncClient) -> None:
    before = await _subscribers(dashboard)
    async with sse(dashboard):
        assert await _subscribers(dashboard) == before + 1
    deadline = time.monotonic() + 10
    while await _subscribers(dashboard) != before:
        assert time.monotonic() < deadline, "the subscriber was never removed"
        await asyncio.sleep(0.05)


async def test_events_resume_after_the_listen_connection_is_killed(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    reader = urlsplit(butler_ecosystem.dashboard_dsn or "").username
    admin = await butler_ecosystem.admin()
    try:
        killed = await admin.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'butlers-dashboard-listen' AND usename = $1",
            reader,
        )
        assert killed and all(row[0] for row in killed)
    finally:
        await admin.close()
    async with sse(dashboard) as events:
        schedule = await _create_schedule(dashboard, f"after-kill-{uuid.uuid4().hex[:6]}")
        await events.wait_for(
            lambda e: e.type == "schedule_changed" and e.data["id"] == schedule["id"], timeout=10
        )
    deadline = time.monotonic() + 20
    while (await dashboard.get("/api/health")).json()["data"]["change_feed"] != "listen":
        assert time.monotonic() < deadline, "the feed did not LISTEN again"
        await asyncio.sleep(0.1)
    await dashboard.delete(f"/api/butlers/health/schedules/{schedule['id']}")
