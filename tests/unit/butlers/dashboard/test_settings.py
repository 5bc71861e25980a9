"""Dashboard settings refuse an exposed API."""

from __future__ import annotations

import pytest

from butlers.errors import ButlersError
from butlers.settings import DashboardSettings


def test_a_login_is_required_unless_refused_explicitly_and_only_on_loopback() -> None:
    assert DashboardSettings.from_env({}).login
    assert DashboardSettings().login
    local = DashboardSettings.from_env({"BUTLERS_DASHBOARD_NO_LOGIN": "1"})
    assert not local.login
    with pytest.raises(ButlersError, match="without a login"):
        DashboardSettings.from_env(
            {"BUTLERS_DASHBOARD_HOST": "0.0.0.0", "BUTLERS_DASHBOARD_NO_LOGIN": "1"}
        )
    with pytest.raises(ButlersError, match="use 1 or 0"):
        DashboardSettings.from_env({"BUTLERS_DASHBOARD_NO_LOGIN": "maybe"})
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
    assert settings.cors_origins == (), "no dev-server origin unless `dev.py ui-dev` runs"
    custom = DashboardSettings.from_env({"BUTLERS_DASHBOARD_CORS_ORIGINS": "http://a, http://b"})
    assert custom.cors_origins == ("http://a", "http://b")
    assert DashboardSettings.from_env({}, kube_namespace="ns").data_dir is None
