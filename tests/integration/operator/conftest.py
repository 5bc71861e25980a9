"""Fixtures for the operator's integration tests: real PostgreSQL, kmock, a running operator.

The operator runs under `kopf.testing.KopfRunner` (its own thread and loop)
against kmock's Kubernetes emulator, which serves from the test's loop.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import kmock
import pytest
from kopf.testing import KopfRunner

from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings
from tests.support.kube_emulator import declare_cluster

BUTLERS = "butlers.dev/v1alpha1/butlers"
NAMESPACE = "home"
DEADLINE = 30.0


@pytest.fixture(scope="session")
def operator_admin_dsn(pg_admin_dsn: str) -> str:
    """The operator's admin database: the session's PostgreSQL."""
    return pg_admin_dsn


@pytest.fixture
def schema_prefix() -> str:
    return f"op{secrets.token_hex(3)}_"


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], what: str, deadline: float = DEADLINE
) -> Any:
    """Poll `check` until it returns something truthy, or fail after `deadline` seconds."""
    stop = time.monotonic() + deadline
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > stop:
            pytest.fail(f"timed out after {deadline} s waiting for {what}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running_operator(settings: OperatorSettings) -> AsyncIterator[KopfRunner]:
    """The real operator, watching NAMESPACE, stopped (off this loop) on exit."""
    runner = KopfRunner(
        ["run", "--standalone", "--namespace", NAMESPACE],
        registry=build_registry(settings),
        settings=build_kopf_settings(settings),
        timeout=30,
    )
    runner.__enter__()
    try:
        yield runner
    finally:
        await asyncio.to_thread(runner.__exit__, None, None, None)


@pytest.fixture
def make_settings(
    kmock: kmock.KubernetesEmulator, operator_admin_dsn: str, schema_prefix: str
) -> Callable[..., OperatorSettings]:
    declare_cluster(kmock, NAMESPACE)

    def make(**overrides: Any) -> OperatorSettings:
        values: dict[str, Any] = {
            "namespaces": (NAMESPACE,),
            "admin_dsn": operator_admin_dsn,
            "schema_prefix": schema_prefix,
            "kube_server": str(kmock.url).rstrip("/"),
            "resync_seconds": 1.0,
            "retry_base_seconds": 0.2,
            "retry_max_seconds": 1.0,
        }
        return OperatorSettings(**(values | overrides))

    return make


async def fetch(dsn: str, query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def execute(dsn: str, script: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(script)
    finally:
        await conn.close()
