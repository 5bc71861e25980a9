"""Dashboard settings refuse an exposed API."""

from __future__ import annotations

import pytest

from butlers.errors import ButlersError
from butlers.settings import DashboardSettings


def test_a_non_loopback_address_needs_a_token() -> None:
    with pytest.raises(ButlersError, match="BUTLERS_DASHBOARD_TOKEN"):
        DashboardSettings.from_env({"BUTLERS_DASHBOARD_HOST": "0.0.0.0"})
    settings = DashboardSettings.from_env(
        {"BUTLERS_DASHBOARD_HOST": "0.0.0.0", "BUTLERS_DASHBOARD_TOKEN": "x" * 32}
    )
    assert settings.host == "0.0.0.0"


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ButlersError, match="at least 16"):
        DashboardSettings.from_env({"BUTLERS_DASHBOARD_TOKEN": "short"})


def test_defaults_and_origins() -> None:
    settings = DashboardSettings.from_env({})
    assert (settings.host, settings.port) == ("127.0.0.1", 40200)
    assert settings.cors_origins == ("http://localhost:40173",)
    custom = DashboardSettings.from_env({"BUTLERS_DASHBOARD_CORS_ORIGINS": "http://a, http://b"})
    assert custom.cors_origins == ("http://a", "http://b")
    assert DashboardSettings.from_env({}, kube_namespace="ns").data_dir is None
