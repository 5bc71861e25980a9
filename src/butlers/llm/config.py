"""Which runtime a butler's sessions use: `spec.runtime`, overridden by `BUTLERS_*`
settings, resolved once at start-up into a `RuntimeConfig`, then built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from butlers import secrets
from butlers.auth.tokens import TokenBook
from butlers.llm.anthropic import AnthropicChatModel
from butlers.llm.claude_code import ClaudeCodeRuntime
from butlers.llm.loop import LoopRuntime
from butlers.llm.openai import OpenAIChatModel
from butlers.llm.scripted import ScriptedChatModel
from butlers.llm.types import SessionRuntime
from butlers.settings import ButlerSettings
from butlers.spec import ButlerSpec

ADAPTERS = ("openai", "anthropic", "claude-code", "scripted")
DEFAULT_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "claude-code": "ANTHROPIC_API_KEY",
}
DEFAULT_MODEL = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}


class RuntimeConfigError(ValueError):
    """The runtime configuration cannot work; the message names what to set."""


@dataclass(frozen=True)
class RuntimeConfig:
    adapter: str
    model: str | None
    base_url: str | None
    api_key_env: str | None
    api_key: str | None = field(repr=False)
    timeout_seconds: float
    max_turns: int
    max_tokens: int = 4096
    max_session_tokens: int = 200_000
    temperature: float | None = 0.0
    script_url: str | None = None
    claude_path: str = "claude"


def not_configured_message(butler: str) -> str:
    return (
        f"butler {butler!r} has no LLM runtime configured: set spec.runtime.adapter "
        f"({' | '.join(ADAPTERS)}) in its roster file, or BUTLERS_RUNTIME_ADAPTER "
        "(with BUTLERS_MODEL, BUTLERS_OPENAI_BASE_URL, BUTLERS_OPENAI_API_KEY) for `butlers up`"
    )


def runtime_key_env(spec: ButlerSpec, adapter_override: str | None) -> str | None:
    """The variable holding the API key of the adapter this butler will use."""
    adapter = adapter_override or spec.runtime.adapter
    return spec.runtime.api_key_env or (DEFAULT_KEY_ENV.get(adapter) if adapter else None)


def resolve_runtime_config(
    butler: str, spec: ButlerSpec, settings: ButlerSettings
) -> RuntimeConfig | None:
    """None when no adapter is configured; raises when a configured one cannot work."""
    over, runtime = settings.runtime, spec.runtime
    adapter = over.adapter or runtime.adapter
    if adapter is None:
        return None
    if adapter not in ADAPTERS:
        raise RuntimeConfigError(
            f"BUTLERS_RUNTIME_ADAPTER={adapter!r} is not one of {', '.join(ADAPTERS)}"
        )
    key_env = runtime_key_env(spec, over.adapter)
    api_key = settings.env_value(key_env) if key_env else None
    base_url = runtime.base_url
    if adapter == "openai":
        base_url = over.openai_base_url or base_url
        api_key = over.openai_api_key or api_key
        if not base_url:
            raise RuntimeConfigError(
                f"butler {butler!r}: the openai adapter needs spec.runtime.baseUrl "
                "or BUTLERS_OPENAI_BASE_URL"
            )
    if adapter == "scripted" and not over.script_url:
        raise RuntimeConfigError("the scripted adapter needs BUTLERS_SCRIPT_URL (tests only)")
    return RuntimeConfig(
        adapter=adapter,
        model=over.model or runtime.model or DEFAULT_MODEL.get(adapter),
        base_url=base_url,
        api_key_env=key_env,
        api_key=api_key,
        timeout_seconds=runtime.timeout_seconds,
        max_turns=runtime.max_turns,
        max_tokens=runtime.max_tokens,
        max_session_tokens=runtime.max_session_tokens,
        temperature=runtime.temperature,
        script_url=over.script_url,
        claude_path=over.claude_path,
    )


def build_session_runtime(
    config: RuntimeConfig,
    *,
    open_toolbox: Callable[..., Any],
    mcp_url: str,
    base_env: dict[str, str],
    tokens: TokenBook,
) -> SessionRuntime:
    if config.adapter == "claude-code":
        return ClaudeCodeRuntime(
            executable=config.claude_path,
            mcp_url=mcp_url,
            model=config.model,
            base_env=base_env,
            tokens=tokens,
        )
    model: Any
    if config.adapter == "openai":
        assert config.base_url and config.model
        model = OpenAIChatModel(
            base_url=config.base_url,
            model=config.model,
            api_key=config.api_key,
            timeout=config.timeout_seconds,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
        )
    elif config.adapter == "anthropic":
        assert config.model
        model = AnthropicChatModel(
            base_url=config.base_url,
            model=config.model,
            api_key=config.api_key,
            timeout=config.timeout_seconds,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
        )
    else:
        assert config.script_url
        model = ScriptedChatModel(script_url=config.script_url, model=config.model)
    return LoopRuntime(
        model,
        open_toolbox,
        config.model or "scripted",
        max_session_tokens=config.max_session_tokens,
    )


def session_env(
    spec: ButlerSpec, settings: ButlerSettings, config: RuntimeConfig | None
) -> dict[str, str]:
    """What a session may see: the variables the spec declares, plus its own runtime key."""
    env: dict[str, str] = {}
    for var in spec.env:
        value = var.value if var.value is not None else settings.env_value(var.name)
        if value is not None:
            env[var.name] = value
    if config and config.api_key_env and config.api_key:
        env[config.api_key_env] = config.api_key
    return env


def secret_values(
    spec: ButlerSpec, settings: ButlerSettings, config: RuntimeConfig | None
) -> list[str]:
    """Values to redact (`butlers.secrets`: the dashboard masks the same), the runtime's
    API keys and the butler's own tokens."""
    own = (
        config.api_key if config else None,
        settings.runtime.openai_api_key,
        settings.auth.token,
        settings.auth.registration_key,
    )
    return secrets.secret_values(settings.environ, [spec], own)
