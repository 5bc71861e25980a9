"""The runtime e2e butlers get: with --live-llm, the real model's settings and key reach
every backend's butlers, the cluster ones (pods inherit nothing) through the env Secret."""

from __future__ import annotations

import base64

import pytest

from tests.e2e.harness import userpath
from tests.e2e.harness.runtime import live_runtime_env, live_runtime_problem

LIVE = {
    "anthropic": {"BUTLERS_RUNTIME_ADAPTER": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-x"},
    "openai": {
        "BUTLERS_RUNTIME_ADAPTER": "openai",
        "BUTLERS_OPENAI_BASE_URL": "https://llm.example/v1",
        "BUTLERS_OPENAI_API_KEY": "sk-x",
        "BUTLERS_MODEL": "m",
    },
}


@pytest.mark.parametrize("adapter", LIVE)
def test_the_live_model_reaches_the_pods_env_secret(adapter: str) -> None:
    environ = LIVE[adapter] | {"HOME": "/root", "UNRELATED_TOKEN": "nope"}
    assert live_runtime_problem(environ) is None
    secret = userpath.build_secret(userpath.ENV_SECRET, "ns", live_runtime_env(environ))
    values = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert LIVE[adapter].items() <= values.items()
    assert "UNRELATED_TOKEN" not in values and "HOME" not in values
    assert values["BUTLERS_MODEL"]  # the cheap default when none is given
