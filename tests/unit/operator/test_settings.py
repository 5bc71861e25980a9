"""Operator settings from the environment, and how it finds its API server."""

from __future__ import annotations

import logging
from pathlib import Path

import kopf
import pytest
import yaml

from butlers_operator.handlers import resolve_connection
from butlers_operator.settings import OperatorSettings


def test_settings_come_from_butlers_operator_variables() -> None:
    settings = OperatorSettings.from_env(
        {
            "BUTLERS_OPERATOR_NAMESPACES": "home, work",
            "BUTLERS_OPERATOR_ADMIN_SECRET": "pg-admin",
            "BUTLERS_OPERATOR_MODEL_PORTS": "443,8443",
            "BUTLERS_OPERATOR_RESYNC_SECONDS": "30",
            "BUTLERS_OPERATOR_BUTLER_ENV_SECRET": "site-env",
            "BUTLERS_OPERATOR_LIVENESS_ENDPOINT": "http://127.0.0.1:9090/healthz",
        }
    )
    assert settings.butler_env_secret == "site-env"
    assert settings.liveness_endpoint == "http://127.0.0.1:9090/healthz"
    assert OperatorSettings.from_env({}).liveness_endpoint == "http://0.0.0.0:8080/healthz"
    assert settings.namespaces == ("home", "work") and not settings.cluster_wide
    assert settings.admin_secret == "pg-admin"
    assert settings.model_ports == (443, 8443)
    assert settings.resync_seconds == 30.0


def test_retry_backoff_doubles_up_to_a_cap() -> None:
    settings = OperatorSettings(retry_base_seconds=5, retry_max_seconds=60)
    assert [settings.retry_delay(n) for n in range(6)] == [5, 10, 20, 40, 60, 60]


def test_outside_a_cluster_the_kubeconfig_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kind",
        "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "me"}}],
        "clusters": [{"name": "kind", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "me", "user": {"token": "t0ken"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(path))
    info = resolve_connection(OperatorSettings(), kopf.OperatorSettings(), logging.getLogger())
    assert (info.server, info.token) == ("https://127.0.0.1:6443", "t0ken")
