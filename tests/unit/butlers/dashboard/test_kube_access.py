"""How `--kube` finds the API server: explicit URL, else kubeconfig's current context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from butlers.dashboard.kube import access_from
from butlers.errors import ButlersError


def test_an_explicit_server_needs_no_credentials() -> None:
    access = access_from({}, api="http://127.0.0.1:8080/")
    assert access.server == "http://127.0.0.1:8080" and access.headers() == {}


def test_the_current_context_of_kubeconfig_gives_server_and_token(tmp_path: Path) -> None:
    config = {
        "current-context": "b",
        "contexts": [
            {"name": "a", "context": {"cluster": "x", "user": "x"}},
            {"name": "b", "context": {"cluster": "c", "user": "u"}},
        ],
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://k8s.example:6443", "insecure-skip-tls-verify": True},
            }
        ],
        "users": [{"name": "u", "user": {"token": "abc"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    access = access_from({"KUBECONFIG": str(path)})
    assert (access.server, access.verify) == ("https://k8s.example:6443", False)
    assert access.headers() == {"Authorization": "Bearer abc"}


def test_no_access_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ButlersError, match="cannot be read"):
        access_from({"KUBECONFIG": str(tmp_path / "none")})
