"""What each dashboard endpoint answers, checked against what the butlers hold.

The route walk (test_routes.py) proves every route answers its envelope; here each
endpoint is asked about something a test made happen, and must report it (and not
report what it must not).
"""

from __future__ import annotations

import random
import re
import string
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2 as httpx
import pytest
import yaml

from butlers.roster import load_roster
from butlers.waiting import wait_until

from ..conftest import ROOT
from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions

ROSTER = {r.name: r for r in load_roster(ROOT / "roster")}


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def token() -> str:
    return f"e2e{uuid.uuid4().hex[:10]}"


def letters() -> str:
    """A random word with no digits (issues group errors with their numbers masked)."""
    return "".join(random.choices(string.ascii_lowercase, k=12))


# -- acting through MCP ------------------------------------------------------------------


async def test_mcp_tools_lists_the_butlers_own_tools_with_their_policy(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    listed = data(await dashboard.get("/api/butlers/relationship/mcp/tools"))
    client = await butler_ecosystem.clients.get(butler_ecosystem["relationship"].url)
    assert [t["name"] for t in listed] == sorted(t.name for t in await client.list_tools())
    tools = {t["name"]: t for t in listed}
    assert (tools["contact_delete"]["module"], tools["contact_delete"]["approval_mode"]) == (
        "contacts",
        "always",
    )
    assert "contact_id" in tools["contact_delete"]["input_schema"]["properties"]
    assert "classify_message" not in tools  # the switchboard's, not relationship's


async def test_mcp_call_runs_the_tool_and_audits_it(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    key, value = f"mcp-call-{token()}", {"n": 7}
    answer = data(
        await dashboard.post(
            "/api/butlers/general/mcp/call",
            json={"tool_name": "state_set", "arguments": {"key": key, "value": value}},
        )
    )
    assert (answer["tool_name"], answer["is_error"]) == ("state_set", False)
    assert answer["result"]["key"] == key
    assert await butler_ecosystem.call("general", "state_get", {"key": key}) == value
    audit = (await dashboard.get("/api/audit-log", params={"butler": "general"})).json()["data"]
    [entry] = [e for e in audit if e["operation"] == "mcp.call" and key in str(e)]
    assert entry["target"] == "state_set" and entry["status"] == "ok"


async def test_mcp_call_reports_a_tool_error_as_is_error(dashboard: httpx.AsyncClient) -> None:
    answer = data(
        await dashboard.post(
            "/api/butlers/general/mcp/call", json={"tool_name": "state_get", "arguments": {}}
        )
    )
    assert answer["is_error"] is True and "key" in answer["raw_text"]


async def test_tick_runs_the_due_task_and_says_so(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    name = f"e2e-dash-tick-{token()}"
    await butler_ecosystem.call(
        "general", "schedule_create", {"name": name, "cron": "0 3 * * *", "job": "state_snapshot"}
    )
    pool = await butler_ecosystem.pool("general")
    try:
        await pool.execute(
            "UPDATE scheduled_tasks SET next_due_at = now() - interval '1 second' WHERE name = $1",
            name,
        )
        ran = data(await dashboard.post("/api/butlers/general/tick"))["ran"]
        assert [(r["name"], r["status"]) for r in ran] == [(name, "completed")]
        row = await pool.fetchrow(
            "SELECT last_run_at, next_due_at FROM scheduled_tasks WHERE name = $1", name
        )
        assert row["last_run_at"] is not None and row["next_due_at"] > datetime.now(UTC)
        assert data(await dashboard.post("/api/butlers/general/tick"))["ran"] == []
    finally:
        await butler_ecosystem.call("general", "schedule_delete", {"name": name})


# -- notifications -----------------------------------------------------------------------


async def test_notifications_list_the_messengers_deliveries(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    text = f"dashboard delivery {token()}"
    delivery = await butler_ecosystem.call(
        "messenger", "notify", {"message": text, "channel": "email"}
    )
    listed = data(await dashboard.get("/api/notifications", params={"status": "failed"}))
    [mine] = [n for n in listed if n["id"] == str(delivery["id"])]
    assert (mine["butler"], mine["channel"], mine["status"]) == ("messenger", "email", "failed")
    assert mine["body"] == text and "credentials" in mine["error"]
    assert all(n["status"] == "failed" for n in listed)
    sent = data(await dashboard.get("/api/notifications", params={"status": "sent"}))
    assert str(delivery["id"]) not in {n["id"] for n in sent}
    own = data(await dashboard.get("/api/butlers/messenger/notifications"))
    assert str(delivery["id"]) in {n["id"] for n in own}


async def test_a_butler_without_the_messenger_has_no_notifications(
    dashboard: httpx.AsyncClient,
) -> None:
    answer = (await dashboard.get("/api/butlers/health/notifications")).json()
    assert answer["data"] == [] and answer["meta"]["supported"] is False
    assert "messenger" in answer["meta"]["reason"]


async def test_notification_stats_count_each_new_delivery(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    before = data(await dashboard.get("/api/notifications/stats"))
    await butler_ecosystem.call(
        "messenger", "notify", {"message": f"stats {token()}", "channel": "email"}
    )
    after = data(await dashboard.get("/api/notifications/stats"))
    assert (after["total"], after["failed"], after["sent"]) == (
        before["total"] + 1,
        before["failed"] + 1,
        before["sent"],
    )
    assert after["failed_24h"] == before["failed_24h"] + 1
    old = before["by_channel"].get("email", {"failed": 0})["failed"]
    assert after["by_channel"]["email"]["failed"] == old + 1
    assert "credentials" in after["last_failure"] and after["last_failure_at"]


async def test_a_reply_being_sent_and_one_sent_again_after_a_crash_are_shown(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    """The messenger's reply rows as a send in progress and a resend after a crash leave
    them: listed with their state and counted."""
    before = data(await dashboard.get("/api/notifications/stats"))
    messenger = await butler_ecosystem.pool("messenger")
    ids = [
        str(
            await messenger.fetchval(
                "INSERT INTO deliveries (channel, recipient, body, status, tool, request_id, "
                "thread, claimed_by, claimed_at, attempts, interrupted) VALUES ('telegram', "
                "'5550001', $1, $2, 'reply', $3, '{}', 1, clock_timestamp(), $4, $5) "
                "RETURNING id",
                f"reply {token()}",
                status,
                uuid.uuid4(),
                attempts,
                interrupted,
            )
        )
        for status, attempts, interrupted in (("sending", 1, 0), ("sent", 2, 1))
    ]
    listed = {n["id"]: n for n in data(await dashboard.get("/api/notifications"))}
    assert [(listed[i]["status"], listed[i]["interrupted"]) for i in ids] == [
        ("sending", 0),
        ("sent", 1),
    ]
    sending = data(await dashboard.get("/api/notifications", params={"status": "sending"}))
    assert ids[0] in {n["id"] for n in sending}
    after = data(await dashboard.get("/api/notifications/stats"))
    assert (after["sending"], after["sent"]) == (before["sending"] + 1, before["sent"] + 1)
    assert after["by_channel"]["telegram"]["sending"] == (
        before["by_channel"].get("telegram", {"sending": 0})["sending"] + 1
    )


# -- search and issues -------------------------------------------------------------------


async def test_search_finds_sessions_and_state_of_every_butler(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    word = token()
    now = datetime.now(UTC)
    [session_id] = await seed_sessions(
        butler_ecosystem,
        "general",
        [{"created_at": now, "prompt": f"please remember {word.upper()} for me"}],
    )
    await butler_ecosystem.call("health", "state_set", {"key": f"search/{word}", "value": 1})
    await butler_ecosystem.call("relationship", "state_set", {"key": "other", "value": word})
    found = data(await dashboard.get("/api/search", params={"q": word}))
    assert [(h["butler"], h["id"]) for h in found["sessions"]] == [("general", session_id)]
    assert word.upper() in found["sessions"][0]["snippet"]
    assert sorted((h["butler"], h["key"]) for h in found["state"]) == [
        ("health", f"search/{word}"),
        ("relationship", "other"),
    ]
    nothing = data(await dashboard.get("/api/search", params={"q": f"{word}-absent"}))
    assert nothing["sessions"] == [] and nothing["state"] == []


async def test_search_treats_like_wildcards_as_text(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    await butler_ecosystem.call("general", "state_set", {"key": "wildcards", "value": "x"})
    found = data(await dashboard.get("/api/search", params={"q": "%%"}))
    assert found["sessions"] == [] and found["state"] == []  # nothing holds "%%"


async def test_issues_group_session_errors_and_list_failed_modules(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    word = letters()
    now = datetime.now(UTC)
    await seed_sessions(
        butler_ecosystem,
        "general",
        [
            {"created_at": now, "status": "error", "error": f"{word} failed after 12 tries"},
            {"created_at": now, "status": "error", "error": f"{word} failed after 345 tries"},
        ],
    )
    issues = data(await dashboard.get("/api/issues"))
    [grouped] = [i for i in issues if word in i["message"]]
    assert (grouped["kind"], grouped["butler"], grouped["count"]) == (
        "session_errors",
        "general",
        2,
    )
    modules = {(i["butler"], i["kind"], i["severity"], i["title"]) for i in issues}
    assert ("messenger", "module_failed", "warning", "module email of messenger is failed") in (
        modules
    )
    # The messenger's e-mail has no credentials here: degraded, and nothing else is.
    troubled = {(i["butler"], i["kind"]) for i in issues if i["kind"].startswith("butler_")}
    assert troubled == {("messenger", "butler_degraded")}, issues


# -- approvals ---------------------------------------------------------------------------


async def _approval_row(eco: EcosystemHandle, args: dict[str, Any], expires_in: float) -> str:
    pool = await eco.pool("relationship")
    return str(
        await pool.fetchval(
            "INSERT INTO approvals (tool_name, tool_args, expires_at) VALUES ($1, $2, "
            "clock_timestamp() + make_interval(secs => $3)) RETURNING id",
            "contact_update",
            args,  # the pool's codec stores it as a JSON object
            expires_in,
        )
    )


async def test_expire_stale_expires_only_requests_past_their_deadline(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    stale = await _approval_row(butler_ecosystem, {"contact_id": token()}, -1)
    live = await _approval_row(butler_ecosystem, {"contact_id": token()}, 300)
    expired = data(await dashboard.post("/api/approvals/actions/expire-stale"))["expired"]
    assert stale in expired["relationship"] and live not in expired["relationship"]
    pool = await butler_ecosystem.pool("relationship")
    statuses = dict(
        await pool.fetch(
            "SELECT id::text, status FROM approvals WHERE id = ANY($1::uuid[])", [stale, live]
        )
    )
    assert statuses == {stale: "expired", live: "pending"}
    await pool.execute("UPDATE approvals SET status = 'expired' WHERE id = $1::uuid", live)


async def test_rule_suggestions_offer_the_spec_yaml_for_the_requests_tool(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    action_id = await _approval_row(
        butler_ecosystem, {"contact_id": token(), "email": "x@example.org"}, 300
    )
    try:
        answer = data(await dashboard.get(f"/api/approvals/rules/suggestions/{action_id}"))
    finally:
        pool = await butler_ecosystem.pool("relationship")
        await pool.execute("UPDATE approvals SET status = 'expired' WHERE id = $1::uuid", action_id)
    assert (answer["action_id"], answer["butler"], answer["tool"]) == (
        action_id,
        "relationship",
        "contact_update",
    )
    modes = [(s["mode"], s["sensitive_args"]) for s in answer["suggestions"]]
    assert modes == [("always", []), ("conditional", ["contact_id", "email"]), ("never", [])]
    rules = [yaml.safe_load(s)["spec"]["approvals"]["rules"] for s in answer["spec_snippets"]]
    assert rules[1] == [
        {"tool": "contact_update", "mode": "conditional", "sensitiveArgs": ["contact_id", "email"]}
    ]
    assert answer["current"]["id"] == "relationship:contact_update"


# -- a butler's own pages ----------------------------------------------------------------


async def test_secrets_list_the_credentials_the_spec_names_without_values(
    dashboard: httpx.AsyncClient,
) -> None:
    listed = data(await dashboard.get("/api/butlers/messenger/secrets"))
    by_key = {s["key"]: s for s in listed}
    assert {k: s["category"] for k, s in by_key.items() if s["category"].startswith("module:")} == {
        "TELEGRAM_BOT_TOKEN": "module:telegram",
        "TELEGRAM_CHAT_ID": "module:telegram",
        "EMAIL_USERNAME": "module:email",
        "EMAIL_PASSWORD": "module:email",
    }
    assert by_key["TELEGRAM_BOT_TOKEN"]["is_set"] is True  # the Bot API stand-in's
    assert by_key["EMAIL_USERNAME"]["is_set"] is False  # the e2e environment empties it
    assert by_key["TELEGRAM_BOT_TOKEN"]["description"] == "spec.modules.telegram.tokenEnv"
    assert all("value" not in s for s in listed)
    one = data(await dashboard.get("/api/butlers/messenger/secrets/EMAIL_PASSWORD"))
    assert one == by_key["EMAIL_PASSWORD"]
    missing = await dashboard.get("/api/butlers/health/secrets/TELEGRAM_BOT_TOKEN")
    assert missing.status_code == 404  # health's spec names no such credential


async def test_butler_detail_is_its_spec_and_live_status(dashboard: httpx.AsyncClient) -> None:
    detail = data(await dashboard.get("/api/butlers/relationship"))
    spec = ROSTER["relationship"].spec
    assert detail["name"] == "relationship" and detail["status"] == "ok"
    assert detail["instructions"] == spec.instructions
    assert detail["routing_hints"] == list(spec.routing.hints)
    assert [r["tool"] for r in detail["approval_rules"]] == [r.tool for r in spec.approvals.rules]
    assert detail["spec_schedules"] == [s.name for s in spec.schedules]


async def test_config_is_the_butler_resource(dashboard: httpx.AsyncClient) -> None:
    config = data(await dashboard.get("/api/butlers/messenger/config"))
    manifest = config["config"]
    assert manifest["metadata"]["name"] == "messenger" and manifest["kind"] == "Butler"
    assert manifest["spec"]["modules"]["telegram"]["tokenEnv"] == "TELEGRAM_BOT_TOKEN"
    assert config["instructions"] == ROSTER["messenger"].spec.instructions


async def test_modules_and_module_states_report_each_modules_start(
    dashboard: httpx.AsyncClient,
) -> None:
    modules = {m["name"]: m for m in data(await dashboard.get("/api/butlers/messenger/modules"))}
    assert set(modules) == set(ROSTER["messenger"].spec.modules)
    assert (modules["messenger"]["status"], modules["email"]["status"]) == ("active", "failed")
    assert modules["telegram"]["status"] == "active"  # against the Bot API stand-in
    assert modules["email"]["phase"] == "credentials"
    assert "EMAIL_USERNAME" in modules["email"]["error"]
    states = data(await dashboard.get("/api/butlers/messenger/module-states"))
    assert {s["name"]: (s["status"], s["enabled"], s["source"]) for s in states} == {
        name: (m["status"], True, "spec") for name, m in modules.items()
    }
    toggleable = {s["name"] for s in states if s["toggleable"]}
    assert toggleable == set(modules) - {"approvals"}, "approvals is required"


async def test_logs_tail_the_butlers_log(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    """Its log file (local), else its pod's `butler` container through `pods/log`."""
    key = f"logs-{token()}"
    await butler_ecosystem.call("health", "state_set", {"key": key, "value": 1})
    if butler_ecosystem.backend == "operator":
        # The rendered pods run as the harness's processes, not as Pod objects: none to read.
        response = await dashboard.get("/api/butlers/health/logs")
        error = response.json()["error"]
        assert (response.status_code, error["code"]) == (404, "NOT_FOUND"), error
        assert "'health' has no pod" in error["message"]
        return

    async def logged() -> dict[str, Any] | None:
        whole = data(await dashboard.get("/api/butlers/health/logs", params={"lines": 2000}))
        return whole if any("call_tool state_set ok" in line for line in whole["lines"]) else None

    # The line is written after the answer (and, in a pod, relayed by its runtime).
    whole = await wait_until(logged, timeout=15, message="the state_set call in health's log")
    assert not any("[general]" in line for line in whole["lines"])
    tail = data(await dashboard.get("/api/butlers/health/logs", params={"lines": 3}))
    assert len(tail["lines"]) == 3 and tail["truncated"] is True
    assert all("[health]" in line for line in tail["lines"] if re.match(r"\d{4}-", line))
    if butler_ecosystem.backend != "local":
        assert re.fullmatch(r"pod [\w-]+/health-[\w-]+, container butler", tail["source"]), tail


async def test_overview_counts_the_sessions_of_the_last_day(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    def card(overview: dict[str, Any], name: str) -> dict[str, Any]:
        return next(c for c in overview["butlers"] if c["name"] == name)

    before = data(await dashboard.get("/api/overview"))
    now = datetime.now(UTC)
    await seed_sessions(
        butler_ecosystem,
        "health",
        [
            {"created_at": now, "status": "error", "error": "x", "cost_usd": 0.25},
            {"created_at": now, "cost_usd": 0.5},
            {"created_at": now - timedelta(days=2), "cost_usd": 1.0},  # outside the day
        ],
    )
    after = data(await dashboard.get("/api/overview"))
    assert card(after, "health")["sessions_24h"] == card(before, "health")["sessions_24h"] + 2
    assert card(after, "health")["errors_24h"] == card(before, "health")["errors_24h"] + 1
    assert card(after, "health")["cost_24h_usd"] == pytest.approx(
        card(before, "health")["cost_24h_usd"] + 0.75
    )
    assert after["totals"]["sessions_24h"] >= before["totals"]["sessions_24h"] + 2
    assert after["totals"]["butlers"] == len(butler_ecosystem.names)
    assert card(after, "health")["pending_approvals"] is None  # no approvals module
    assert card(after, "relationship")["pending_approvals"] is not None
