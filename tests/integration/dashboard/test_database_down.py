"""A stopped database is DATABASE_UNAVAILABLE (503), never an empty page; the dashboard
itself stays up and recovers when the database is back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2 as httpx
import pytest

from butlers import migrations
from butlers.dashboard.directory import ButlerInfo
from butlers.db.embedded import EmbeddedPostgres, free_port
from butlers.db.provision import provision
from butlers.db.readers import dashboard_role, dashboard_schema
from butlers.settings import DashboardSettings
from tests.support.dashboard import StaticDirectory, served_dashboard
from tests.support.scratch import scratch_dir


@pytest.fixture
async def own_server() -> AsyncIterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone: it gets stopped."""
    with scratch_dir("butlers-dash-down-") as root:
        server = EmbeddedPostgres(root / "postgres", fsync=False)
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def test_stopped_database_is_database_unavailable_then_recovers(
    own_server: EmbeddedPostgres,
) -> None:
    admin = own_server.admin_dsn()
    reader = await provision(admin, dashboard_schema(), role=dashboard_role())
    butler = await provision(admin, "solo")
    await migrations.upgrade(butler.dsn(admin), "solo", [migrations.CORE], reader_role=reader.role)
    token = "user-token-" + "d" * 24
    solo = ButlerInfo("solo", f"http://127.0.0.1:{free_port()}/mcp", "solo")
    directory = StaticDirectory([solo], mcp_token=token)
    settings = DashboardSettings(
        port=free_port(), dsn=reader.dsn(admin), schema=reader.schema, poll_interval=0.2
    )
    async with (
        served_dashboard(settings, directory) as (url, _app),
        httpx.AsyncClient(
            base_url=url, timeout=30, headers={"Authorization": f"Bearer {token}"}
        ) as client,
    ):
        assert (await client.get("/api/sessions")).json()["meta"]["total"] == 0
        own_server.stop()
        listed = await client.get("/api/sessions")
        assert listed.status_code == 503, listed.text
        assert listed.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
        one = await client.get("/api/butlers/solo/state")
        assert (one.status_code, one.json()["error"]["butler"]) == (503, "solo")
        audit = await client.get("/api/audit-log")
        assert audit.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
        health = await client.get("/api/health")
        assert health.status_code == 200
        own_server.start()
        assert (await client.get("/api/sessions")).status_code == 200
        assert (await client.get("/api/butlers/solo/state")).status_code == 200
