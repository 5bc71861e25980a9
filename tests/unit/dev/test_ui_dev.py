"""`dev.py ui-dev` is what allows the web UI's dev-server origin: on the dashboard it
starts for it, and nowhere else (a dashboard's default allows no other origin)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from butlers.settings import DashboardSettings

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("butlers_dev_ui_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Started:
    """A child process that has already exited."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.args, self.env = args, env

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def terminate(self) -> None:
        pass


def test_only_the_dashboard_ui_dev_starts_allows_the_dev_server_origin(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[_Started] = []

    def popen(args: list[str], **kwargs: Any) -> _Started:
        started.append(_Started(list(args), kwargs["env"]))
        return started[-1]

    monkeypatch.delenv("BUTLERS_DASHBOARD_CORS_ORIGINS", raising=False)
    monkeypatch.setattr(dev.subprocess, "Popen", popen)
    monkeypatch.setattr(dev, "node_tools", lambda: ("/node/bin", ["npm"]))
    assert dev.ui_dev(["--data-dir", "/nowhere"]) == 0
    dashboard = next(child for child in started if "dashboard" in child.args)
    assert dashboard.args[-2:] == ["--data-dir", "/nowhere"]
    settings = DashboardSettings.from_env(dashboard.env)
    assert settings.cors_origins == ("http://localhost:40173",)
    assert f":{settings.port}" in (ROOT / "frontend" / "vite.config.ts").read_text()
    assert DashboardSettings.from_env({}).cors_origins == ()
