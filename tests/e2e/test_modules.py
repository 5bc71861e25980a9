"""Modules end to end: degradation, channels without credentials, database isolation.

Which tables and module statuses each roster butler has is the smoke tests' part
(`test_ecosystem_health.py`, derived from the roster: `harness/roster_expect.py`)."""

from pathlib import Path

import httpx2 as httpx

from .harness.ecosystem import EcosystemHandle
from .harness.solo import solo_butler

POOL_ENV = {"BUTLERS_POOL_MIN_SIZE": "2", "BUTLERS_POOL_MAX_SIZE": "3"}


async def _tables(handle: EcosystemHandle, butler: str) -> set[str]:
    conn = await handle.admin()
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
            handle[butler].schema,
        )
    finally:
        await conn.close()
    return {row["table_name"] for row in rows}


async def test_failed_channel_modules_register_no_tools(butler_ecosystem: EcosystemHandle) -> None:
    tools = {
        t.name
        for t in await (
            await butler_ecosystem.clients.get(butler_ecosystem["messenger"].url)
        ).list_tools()
    }
    assert {"notify", "deliveries_list", "channels_list", "status", "state_set"} <= tools
    assert {"telegram_send", "telegram_updates"} <= tools  # against the Bot API stand-in
    assert "email_send" not in tools


async def test_messenger_still_logs_deliveries_without_channels(
    butler_ecosystem: EcosystemHandle,
) -> None:
    delivery = await butler_ecosystem.call(
        "messenger", "notify", {"message": "e2e ping", "channel": "email"}
    )
    assert delivery["channel"] == "email"
    assert delivery["status"] == "failed"
    assert "credentials" in delivery["error"]
    log = await butler_ecosystem.call("messenger", "deliveries_list", {"status": "failed"})
    assert delivery["id"] in {d["id"] for d in log}
    channels = await butler_ecosystem.call("messenger", "channels_list")
    assert {c["channel"]: c["available"] for c in channels} == {"telegram": True, "email": False}


async def test_butler_with_failed_modules_is_ready(butler_ecosystem: EcosystemHandle) -> None:
    base = butler_ecosystem["messenger"].url.removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=5) as http:
        ready = await http.get(f"{base}/ready")
    assert ready.status_code == 200
    assert ready.json()["migrations"] == "at head"


async def test_health_tools_never_write_the_relationship_schema(
    butler_ecosystem: EcosystemHandle,
) -> None:
    relationship = butler_ecosystem["relationship"].schema
    conn = await butler_ecosystem.admin()
    try:

        async def row_counts() -> dict[str, int]:
            counts = {}
            for table in sorted(await _tables(butler_ecosystem, "relationship")):
                counts[table] = await conn.fetchval(
                    f'SELECT count(*) FROM "{relationship}"."{table}"'
                )
            return counts

        before = await row_counts()
        await butler_ecosystem.call(
            "health", "measurement_log", {"type": "weight", "value": 79.5, "unit": "kg"}
        )
        await butler_ecosystem.call("health", "symptom_log", {"name": "isolation-check"})
        assert await row_counts() == before
    finally:
        await conn.close()
    health_rows = await (await butler_ecosystem.pool("health")).fetchval(
        "SELECT count(*) FROM symptoms WHERE name = 'isolation-check'"
    )
    assert health_rows == 1


async def test_cascade_failed_is_reported_by_a_running_butler(
    butler_ecosystem: EcosystemHandle, tmp_path: Path
) -> None:
    """A butler whose `approvals` config is invalid runs anyway: `approvals` is failed
    (phase config, naming the field), `contacts` (which needs it) is cascade_failed, their
    tools are absent, and the core tools work. (Its database pool is sized as its
    environment says: one solo butler serves both checks, each costs a process start.)"""
    spec = {
        "description": "A relationship butler with a broken approvals configuration.",
        "modules": {"approvals": {"noSuchOption": True}, "contacts": {}},
    }
    async with (
        solo_butler(butler_ecosystem, tmp_path / "solo", "degraded", spec, POOL_ENV) as butler,
        butler.client() as client,
    ):
        status = (await client.call_tool("status", {})).data
        tools = {t.name for t in await client.list_tools()}
        stored = (await client.call_tool("state_set", {"key": "k", "value": 1})).data
    modules = {m["name"]: m for m in status["modules"]}
    assert (modules["approvals"]["status"], modules["approvals"]["phase"]) == ("failed", "config")
    assert "noSuchOption" in modules["approvals"]["error"]
    assert (modules["contacts"]["status"], modules["contacts"]["phase"]) == (
        "cascade_failed",
        "dependencies",
    )
    assert "approvals" in modules["contacts"]["error"]
    assert not tools & {"contact_add", "contact_delete", "approval_decide", "approval_list"}
    assert {"status", "state_set", "trigger"} <= tools and stored["key"] == "k"
    pool = status["pool"]
    assert (pool["min_size"], pool["max_size"]) == (2, 3) and 2 <= pool["size"] <= 3
