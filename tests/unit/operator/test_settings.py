"""Operator settings from the environment, and how it finds its API server."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import kopf
import pytest
import yaml

from butlers_operator.handlers import resolve_connection
from butlers_operator.settings import OperatorSettings, SettingsError


def test_settings_come_from_butlers_operator_variables() -> None:
    settings = OperatorSettings.from_env(
        {
            "BUTLERS_OPERATOR_NAMESPACES": "home, work",
            "BUTLERS_OPERATOR_ADMIN_SECRET": "pg-admin",
            "BUTLERS_OPERATOR_ADMIN_SECRET_KEY": "uri",
            "BUTLERS_OPERATOR_IMAGE_PULL_POLICY": "Always",
            "BUTLERS_OPERATOR_NETWORK_POLICY": json.dumps(
                {"model": {"cidrs": ["203.0.113.0/24"], "ports": [443, 8443]}}
            ),
            "BUTLERS_OPERATOR_POD_DEFAULTS": json.dumps({"imagePullSecrets": ["regcred"]}),
            "BUTLERS_OPERATOR_RESYNC_SECONDS": "30",
            "BUTLERS_OPERATOR_BUTLER_ENV_SECRET": "site-env",
        }
    )
    assert settings.butler_env_secret == "site-env"
    assert settings.namespaces == ("home", "work") and not settings.cluster_wide
    assert (settings.admin_secret, settings.admin_secret_key) == ("pg-admin", "uri")
    assert settings.image_pull_policy == "Always"
    assert settings.network_policy.model.ports == (443, 8443)
    assert settings.network_policy.model.cidrs == ("203.0.113.0/24",)
    assert settings.network_policy.database.cidrs == ("0.0.0.0/0", "::/0")
    assert settings.pod_defaults.image_pull_secrets == ("regcred",)
    assert settings.resync_seconds == 30.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BUTLERS_OPERATOR_NETWORK_POLICY", "{not json"),
        ("BUTLERS_OPERATOR_NETWORK_POLICY", '{"modle": {}}'),
        ("BUTLERS_OPERATOR_POD_DEFAULTS", '{"tolerations": "all"}'),
        ("BUTLERS_OPERATOR_RESYNC_SECONDS", "soon"),
    ],
)
def test_a_bad_setting_is_an_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        OperatorSettings.from_env({name: value})


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
