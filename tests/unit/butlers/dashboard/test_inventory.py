"""The generated route inventory and OpenAPI schema are current; module views are keyed
by registered modules; every route declares its response model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi import APIRouter
from starlette.testclient import TestClient

from butlers.dashboard import app as app_module
from butlers.dashboard.app import api_routes, create_app
from butlers.modules.registry import MODULE_NAMES
from butlers.modules.views import MODULE_VIEWS
from butlers.settings import DashboardSettings
from hack.dashboard_inventory import documents


def test_the_committed_inventory_and_openapi_schema_are_current() -> None:
    for path, text in documents(create_app()).items():
        assert path.exists(), f"{path} is missing: run python hack/dashboard_inventory.py"
        assert path.read_text() == text, f"{path} is stale: run python hack/dashboard_inventory.py"


def test_every_route_but_the_event_stream_has_a_response_model() -> None:
    missing = [r.path for r in api_routes() if r.response_model is None and r.path != "/api/events"]
    assert missing == []


def test_module_views_belong_to_registered_modules() -> None:
    assert set(MODULE_VIEWS) <= MODULE_NAMES


def test_the_dashboard_never_loads_the_mcp_server_stack() -> None:
    """The app and its routers import neither FastMCP nor the MCP SDK nor any module's
    MCP-facing side (their memory would count against the dashboard's): only modules'
    stores and views."""
    code = (
        "import sys; from butlers.dashboard.app import create_app; create_app(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastmcp', 'mcp') "
        "or (m.startswith('butlers.modules.') and m.rsplit('.', 1)[-1] not in "
        "('store', 'views', 'view') and m.count('.') > 2) or m in ('butlers.modules.base', "
        "'butlers.modules.registry', 'butlers.modules.loader')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_module_route_cannot_shadow_a_core_path(monkeypatch: pytest.MonkeyPatch) -> None:
    intruder = APIRouter()

    @intruder.get("/api/auth/status")
    async def shadow() -> dict[str, bool]:
        return {"shadowed": True}

    monkeypatch.setattr(app_module, "module_routers", lambda: [("intruder", intruder)])
    token = "t" * 32
    app = app_module.create_app(DashboardSettings(token=token))
    client = TestClient(app, base_url="http://127.0.0.1")
    body = client.get("/api/auth/status", headers={"Authorization": f"Bearer {token}"}).json()
    assert body["data"]["authenticated"] is True and "shadowed" not in body
    origins = [origin for origin, _router in app_module.api_routers()]
    assert origins[-1] == "intruder" and set(origins[:-1]) == {"core"}
