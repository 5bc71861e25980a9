"""A butler with its spawner and scheduler in-process (`build_butler`), on a fresh schema."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

import pytest
from fastmcp import Client

from butlers.daemon.butler import build_butler
from butlers.settings import ButlerSettings
from butlers.spec import ButlerResource
from butlers.testing.script_server import ScriptServer
from tests.support.butlers import (
    UNUSED_MCP_URL,
    InProcessButler,
    make_resource,
    make_settings,
)

ButlerApp = InProcessButler
__all__ = ["ButlerApp", "make_resource", "make_settings"]


@pytest.fixture
async def make_app(
    butler_schema: Any, llm_script_server: ScriptServer
) -> AsyncIterator[Callable[..., Any]]:
    """Build a butler app: `await make_app(resource=..., settings=...)`, scripted by default.

    The scheduler loop is not started: tests tick explicitly.
    """
    async with AsyncExitStack() as stack:

        async def build(
            resource: ButlerResource | None = None, settings: ButlerSettings | None = None
        ) -> ButlerApp:
            resource = resource or make_resource()
            settings = settings or make_settings(
                adapter="scripted", script_url=llm_script_server.url
            )
            if settings.runtime.adapter == "scripted" and not settings.runtime.script_url:
                runtime = replace(settings.runtime, script_url=llm_script_server.url)
                settings = replace(settings, runtime=runtime)
            built = await build_butler(
                resource,
                butler_schema.pool,
                settings,
                schema=butler_schema.schema,
                mcp_url=UNUSED_MCP_URL,
            )
            stack.push_async_callback(built.aclose)
            client = await stack.enter_async_context(Client(built.server, timeout=30))
            return ButlerApp(built=built, client=client)

        yield build
