"""Resolving a butler's runtime from its spec and the `BUTLERS_*` overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from butlers.auth.tokens import TokenBook
from butlers.llm.config import (
    RuntimeConfigError,
    build_session_runtime,
    resolve_runtime_config,
    secret_values,
    session_env,
)
from butlers.llm.loop import LoopRuntime
from butlers.llm.openai import OpenAIChatModel
from butlers.llm.types import SessionRequest
from butlers.settings import ButlerSettings
from butlers.spec import ButlerSpec


def _spec(**fields) -> ButlerSpec:  # type: ignore[no-untyped-def]
    return ButlerSpec.model_validate({"description": "d", "port": 41000, **fields})


def _settings(**env: str) -> ButlerSettings:
    return ButlerSettings.from_env({"BUTLERS_DSN": "x", **env}, spec_path=Path("s.yaml"))


def test_no_adapter_means_no_runtime() -> None:
    assert resolve_runtime_config("health", _spec(), _settings()) is None


def test_spec_runtime_is_used() -> None:
    spec = _spec(runtime={"adapter": "anthropic", "model": "claude-x", "timeoutSeconds": 9})
    config = resolve_runtime_config("health", spec, _settings(ANTHROPIC_API_KEY="ak"))
    assert config is not None
    assert (config.adapter, config.model, config.api_key, config.timeout_seconds) == (
        "anthropic",
        "claude-x",
        "ak",
        9,
    )


def test_butlers_env_overrides_every_spec() -> None:
    settings = _settings(
        BUTLERS_RUNTIME_ADAPTER="openai",
        BUTLERS_OPENAI_BASE_URL="http://localhost:11434/v1",
        BUTLERS_OPENAI_API_KEY="ok",
        BUTLERS_MODEL="llama3",
    )
    config = resolve_runtime_config("health", _spec(runtime={"adapter": "anthropic"}), settings)
    assert config is not None
    assert (config.adapter, config.base_url, config.api_key, config.model) == (
        "openai",
        "http://localhost:11434/v1",
        "ok",
        "llama3",
    )


def test_openai_without_base_url_names_the_setting() -> None:
    with pytest.raises(RuntimeConfigError, match="BUTLERS_OPENAI_BASE_URL"):
        resolve_runtime_config("health", _spec(runtime={"adapter": "openai"}), _settings())


def test_session_env_holds_declared_variables_and_the_key_only() -> None:
    spec = _spec(
        runtime={"adapter": "claude-code"},
        env=[
            {"name": "HEALTH_TOKEN", "secretKeyRef": {"name": "s", "key": "k"}},
            {"name": "UNITS", "value": "metric"},
        ],
    )
    settings = _settings(
        HEALTH_TOKEN="ht", ANTHROPIC_API_KEY="ak", TEST_SECRET_CANARY="c", RELATIONSHIP_TOKEN="rt"
    )
    config = resolve_runtime_config("health", spec, settings)
    env = session_env(spec, settings, config)
    assert env == {"HEALTH_TOKEN": "ht", "UNITS": "metric", "ANTHROPIC_API_KEY": "ak"}
    # Redacted: the declared secret, the key, and every credential-named variable.
    assert sorted(secret_values(spec, settings, config)) == ["ak", "c", "ht", "rt"]


def test_one_butler_does_not_see_another_butlers_credentials() -> None:
    relationship = _spec(env=[{"name": "RELATIONSHIP_TOKEN"}])
    health = _spec(env=[{"name": "HEALTH_TOKEN"}])
    settings = _settings(HEALTH_TOKEN="ht", RELATIONSHIP_TOKEN="rt")
    assert session_env(health, settings, None) == {"HEALTH_TOKEN": "ht"}
    assert session_env(relationship, settings, None) == {"RELATIONSHIP_TOKEN": "rt"}


def test_every_cap_of_the_spec_reaches_the_request_and_the_loop() -> None:
    caps = {"maxTokens": 77, "temperature": 0.3, "maxSessionTokens": 999, "timeoutSeconds": 12}
    spec = _spec(runtime={"adapter": "openai", "model": "m", "baseUrl": "http://x/v1", **caps})
    config = resolve_runtime_config("health", spec, _settings())
    assert config is not None
    runtime = build_session_runtime(
        config, open_toolbox=None, mcp_url="http://x", base_env={}, tokens=TokenBook()
    )
    assert isinstance(runtime, LoopRuntime) and runtime._max_session_tokens == 999
    model = runtime._model
    assert isinstance(model, OpenAIChatModel) and model._client.timeout.read == 12
    request = SessionRequest(butler="health", session_id="s", system="", prompt="p", max_turns=1)
    sent = model.payload(request, [{"role": "user", "content": "p"}], [])
    assert (sent["max_tokens"], sent["temperature"]) == (77, 0.3)
