"""The switchboard's registry decides where messages go: only a butler itself may
register or heartbeat its name, entries are bounded, and stale ones can be removed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .harness.ecosystem import EcosystemHandle

EVIL_URL = "http://127.0.0.1:9/mcp"


async def _registry(eco: EcosystemHandle) -> dict[str, dict[str, Any]]:
    rows = await eco.call("switchboard", "butler_registry_list")
    return {row["name"]: row for row in rows}


async def _wait_for_url(eco: EcosystemHandle, name: str, url: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while (await _registry(eco)).get(name, {}).get("url") != url:
        assert time.monotonic() < deadline, f"{name} not registered at {url} within {timeout} s"
        await asyncio.sleep(0.1)


@pytest.fixture
async def health_route(butler_ecosystem: EcosystemHandle) -> AsyncIterator[str]:
    """The health butler's registered URL, put back (by deregistering the impostor row,
    so the real butler registers again) if a test's attack got through."""
    url = butler_ecosystem["health"].registered_url
    yield url
    row = (await _registry(butler_ecosystem)).get("health", {})
    if row.get("url") != url or len(row.get("description", "")) > 10_000:
        async with butler_ecosystem.client("switchboard", token=None) as anonymous:
            await anonymous.call_tool(
                "butler_register",
                {"name": "health", "description": "restored", "url": url},
                raise_on_error=False,
            )
        await _wait_for_url(butler_ecosystem, "health", url)


async def _register(eco: EcosystemHandle, token: str | None, **arguments: Any) -> Any:
    async with eco.client("switchboard", token=token) as client:
        return await client.call_tool("butler_register", arguments, raise_on_error=False)


async def test_nobody_else_can_move_a_butlers_route(
    butler_ecosystem: EcosystemHandle, health_route: str
) -> None:
    """Another butler, and even the user, cannot point `health` somewhere else."""
    eco = butler_ecosystem
    for token in (eco.butler_tokens["general"], eco.token):
        result = await _register(eco, token, name="health", description="x", url=EVIL_URL)
        assert result.is_error, "a foreign identity re-registered health"
    assert (await _registry(eco))["health"]["url"] == health_route


async def test_another_butler_cannot_heartbeat_a_name_that_is_not_its_own(
    butler_ecosystem: EcosystemHandle,
) -> None:
    async with butler_ecosystem.client(
        "switchboard", token=butler_ecosystem.butler_tokens["general"]
    ) as general:
        result = await general.call_tool(
            "butler_heartbeat", {"name": "health"}, raise_on_error=False
        )
    assert result.is_error


async def test_a_butler_registers_itself_with_its_own_token(
    butler_ecosystem: EcosystemHandle, health_route: str
) -> None:
    eco = butler_ecosystem
    result = await _register(
        eco,
        eco.butler_tokens["health"],
        name="health",
        description="Health butler (re-registered by itself)",
        url=health_route,
        hints=["weight"],
    )
    assert not result.is_error, result
    assert (await _registry(eco))["health"]["description"].endswith("by itself)")


@pytest.mark.parametrize(
    "field, value",
    [
        ("description", "x" * 3_000_000),
        ("hints", ["hint"] * 1000),
        ("hints", ["h" * 5000]),
        ("url", "http://127.0.0.1:1/" + "p" * 5000),
    ],
    ids=["3MB-description", "1000-hints", "huge-hint", "huge-url"],
)
async def test_registration_fields_are_bounded(
    butler_ecosystem: EcosystemHandle, health_route: str, field: str, value: Any
) -> None:
    """Whatever a butler registers goes into every classification prompt."""
    eco = butler_ecosystem
    arguments = {"name": "health", "description": "Health", "url": health_route, field: value}
    result = await _register(eco, eco.butler_tokens["health"], **arguments)
    assert result.is_error
    row = (await _registry(eco))["health"]
    assert len(row["description"]) < 10_000 and len(row["hints"]) < 100


async def test_a_butler_can_deregister_and_registers_again(
    butler_ecosystem: EcosystemHandle, health_route: str
) -> None:
    eco = butler_ecosystem
    async with eco.client("switchboard", token=eco.butler_tokens["health"]) as health:
        result = await health.call_tool("butler_deregister", {"name": "health"})
    assert result.data == {"name": "health", "deregistered": True}
    # Its heartbeat (every second in e2e) learns it is unknown and registers again.
    await _wait_for_url(eco, "health", health_route)


async def test_another_butler_cannot_deregister_a_name_that_is_not_its_own(
    butler_ecosystem: EcosystemHandle,
) -> None:
    eco = butler_ecosystem
    async with eco.client("switchboard", token=eco.butler_tokens["general"]) as general:
        result = await general.call_tool(
            "butler_deregister", {"name": "health"}, raise_on_error=False
        )
    assert result.is_error
    assert "health" in await _registry(eco)
