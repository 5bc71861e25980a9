"""Smoke: every butler is up, serves MCP, has its core and domain tables and reports its
modules, with no model call. These tests run first (harness/ordering.py); the per-butler
ones are parametrized from the roster, so a new roster butler is covered unedited."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2 as httpx
import pytest

from butlers.settings import DEFAULT_POOL_SIZES
from butlers.testing.script_server import ScriptServer

from .conftest import ROOT
from .harness.ecosystem import EcosystemHandle
from .harness.env import CALDAV_SERVER, E2E_ENV, caldav_env
from .harness.roster_expect import domain_tables, expected_modules, roster
from .harness.telegram import telegram_env

ROSTER = roster(Path(os.environ.get("BUTLERS_E2E_ROSTER", ROOT / "roster")))
BUTLERS = [r.name for r in ROSTER]
ALL_DOMAIN_TABLES = {r.name: domain_tables(r) for r in ROSTER}

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


async def test_every_roster_butler_is_in_the_ecosystem_and_the_registry(
    butler_ecosystem: EcosystemHandle,
) -> None:
    assert sorted(butler_ecosystem.names) == BUTLERS
    registered = await butler_ecosystem.call("switchboard", "butler_registry_list")
    assert sorted(r["name"] for r in registered) == BUTLERS


@pytest.mark.parametrize("butler", BUTLERS)
async def test_schema_has_the_tables_of_its_modules_and_no_others(
    butler_ecosystem: EcosystemHandle, butler: str
) -> None:
    conn = await butler_ecosystem.admin()
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
            butler_ecosystem[butler].schema,
        )
    finally:
        await conn.close()
    tables = {row["table_name"] for row in rows}
    own = ALL_DOMAIN_TABLES[butler]
    assert own <= tables, f"{butler} lacks {own - tables}"
    foreign = set().union(*(t for n, t in ALL_DOMAIN_TABLES.items() if n != butler)) - own
    assert not tables & foreign, f"{butler} has another butler's tables {tables & foreign}"


@pytest.mark.parametrize("butler", BUTLERS)
async def test_modules_report_the_status_their_credentials_allow(
    butler_ecosystem: EcosystemHandle, butler: str, request: pytest.FixtureRequest
) -> None:
    [resource] = [r for r in ROSTER if r.name == butler]
    calendar = caldav_env(request.config.stash.get(CALDAV_SERVER, None))
    environ = {**os.environ, **E2E_ENV, **telegram_env("http://bot"), **calendar}
    expected = expected_modules(resource, environ)
    status = await butler_ecosystem.call(butler, "status")
    got = {m["name"]: (m["status"], m["phase"]) for m in status["modules"]}
    assert got == expected


@pytest.mark.parametrize("butler", BUTLERS)
async def test_each_pool_is_sized_as_its_spec_says(
    butler_ecosystem: EcosystemHandle, butler: str
) -> None:
    """`spec.database.pool` reaches the butler's process on every backend (`butlers up`
    and the operator pass it as BUTLERS_POOL_*); unset, the defaults."""
    [resource] = [r for r in ROSTER if r.name == butler]
    sizes = resource.spec.database.pool
    low = sizes.min_size or DEFAULT_POOL_SIZES[0]
    high = sizes.max_size or max(DEFAULT_POOL_SIZES[1], low)
    pool = (await butler_ecosystem.call(butler, "status"))["pool"]
    assert (pool["min_size"], pool["max_size"]) == (low, high)


async def test_smoke_tests_made_no_model_call(llm_script_server: ScriptServer) -> None:
    """The smoke tests run first and call no model: nothing reached the scripted model
    since the session began (the ecosystem's start included)."""
    assert llm_script_server.requests_served == 0
