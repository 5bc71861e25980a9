"""Smoke: every butler is up, serves MCP, and has its core tables."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from .harness.ecosystem import EcosystemHandle

CORE_TABLES = {"state", "scheduled_tasks", "sessions", "alembic_version_core"}
CORE_TOOLS = {
    "status",
    "state_get",
    "state_set",
    "state_list",
    "state_delete",
    "sessions_list",
    "sessions_get",
}


async def test_every_roster_butler_is_running(butler_ecosystem: EcosystemHandle) -> None:
    assert set(butler_ecosystem.names) >= {
        "switchboard",
        "general",
        "relationship",
        "health",
        "messenger",
    }


async def test_every_butler_answers_tools_list_over_http(butler_ecosystem: EcosystemHandle) -> None:
    for name in butler_ecosystem.names:
        async with butler_ecosystem.client(name) as client:
            tools = {tool.name for tool in await client.list_tools()}
        assert tools >= CORE_TOOLS, f"{name} lacks {CORE_TOOLS - tools}"


async def test_every_butler_answers_over_sse(butler_ecosystem: EcosystemHandle) -> None:
    for name in butler_ecosystem.names:
        async with butler_ecosystem.client(name, sse=True) as client:
            result = await client.call_tool("status", {})
        assert result.data["name"] == name


async def test_health_and_ready_probes(butler_ecosystem: EcosystemHandle) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        for name in butler_ecosystem.names:
            base = butler_ecosystem[name].url.removesuffix("/mcp")
            health = await http.get(f"{base}/health")
            ready = await http.get(f"{base}/ready")
            assert health.status_code == 200
            assert ready.status_code == 200, ready.text
            assert ready.json()["migrations"] == "at head"


async def test_status_reports_name_description_and_uptime(
    butler_ecosystem: EcosystemHandle,
) -> None:
    status = await butler_ecosystem.call("health", "status")
    assert status["name"] == "health"
    assert "measurement" in status["description"].lower()
    assert status["uptime_seconds"] > 0
    assert isinstance(status["modules"], list)


async def test_core_tables_exist_in_every_schema(butler_ecosystem: EcosystemHandle) -> None:
    conn = await butler_ecosystem.admin()
    try:
        for name in butler_ecosystem.names:
            schema = butler_ecosystem[name].schema
            rows = await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
            )
            tables = {row["table_name"] for row in rows}
            assert tables >= CORE_TABLES, f"{schema} lacks {CORE_TABLES - tables}"
    finally:
        await conn.close()


@pytest.mark.parametrize("other", ["relationship", "switchboard"])
async def test_a_butler_role_cannot_read_another_schema(
    butler_ecosystem: EcosystemHandle, other: str
) -> None:
    import asyncpg

    pool = await butler_ecosystem.pool("health")
    other_schema = butler_ecosystem[other].schema
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.fetch(f'SELECT * FROM "{other_schema}".state')
