"""Module start-up without a database: ordering, config errors, isolation, cascades."""

from typing import Any

from fastmcp import Client

from butlers.core.context import ButlerContext
from butlers.daemon.server import build_server
from butlers.modules.loader import dependency_order, module_chains, start_modules
from butlers.spec import ButlerResource


def _butler(modules: dict[str, Any]) -> ButlerContext:
    resource = ButlerResource.model_validate(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": "probe"},
            "spec": {"description": "d", "port": 40999, "modules": modules},
        }
    )
    return ButlerContext(resource=resource, schema="probe", pool=None)  # type: ignore[arg-type]


async def _start(modules: dict[str, Any]) -> tuple[ButlerContext, set[str], dict[str, Any]]:
    butler = _butler(modules)
    mcp = build_server(butler)
    started = await start_modules(mcp, butler)
    await started.stop()
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
    return butler, set(tools), {m.name: m for m in butler.modules}


def test_dependencies_start_first() -> None:
    assert dependency_order({"contacts": {}, "approvals": {}}) == ["approvals", "contacts"]


def test_optional_channels_precede_the_messenger() -> None:
    order = dependency_order({"messenger": {}, "telegram": {}, "email": {}})
    assert order.index("telegram") < order.index("messenger")
    assert order.index("email") < order.index("messenger")


def test_chains_follow_dependency_order_and_skip_chainless_modules() -> None:
    chains = module_chains({"contacts": {}, "approvals": {}, "telegram": {}})
    assert [c.name for c in chains] == ["approvals", "contacts"]
    assert [c.version_table for c in chains] == [
        "alembic_version_approvals",
        "alembic_version_contacts",
    ]


async def test_bad_config_fails_with_phase_config_naming_the_field() -> None:
    _, tools, states = await _start({"health": {"bogus": 1}})
    assert (states["health"].status, states["health"].phase) == ("failed", "config")
    assert "bogus" in (states["health"].error or "")
    assert "measurement_log" not in tools and "status" in tools


async def test_dependants_of_a_failed_module_are_cascade_failed() -> None:
    _, tools, states = await _start({"approvals": {"nope": True}, "contacts": {}, "health": {}})
    assert states["approvals"].status == "failed"
    assert (states["contacts"].status, states["contacts"].phase) == (
        "cascade_failed",
        "dependencies",
    )
    assert "approvals" in (states["contacts"].error or "")
    assert "contact_add" not in tools
    assert states["health"].status == "active" and "measurement_log" in tools


async def test_missing_hard_dependency_fails_the_module() -> None:
    _, tools, states = await _start({"contacts": {}})
    assert (states["contacts"].status, states["contacts"].phase) == ("failed", "dependencies")
    assert "contact_delete" not in tools


async def test_unknown_module_is_reported_not_fatal() -> None:
    _, tools, states = await _start({"teleport": {}, "general": {}})
    assert (states["teleport"].status, states["teleport"].phase) == ("failed", "config")
    assert "note_add" in tools


async def test_module_tools_carry_their_module_in_meta() -> None:
    butler = _butler({"health": {}})
    mcp = build_server(butler)
    await start_modules(mcp, butler)
    tool = await mcp.get_tool("measurement_log")
    assert tool is not None and (tool.meta or {})["module"] == "health"
