"""Settings of each deployable, built once at start-up from arguments and `BUTLERS_*`.

This is the only module that reads environment variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from butlers.errors import ButlersError

DEFAULT_DATA_DIR = Path(".butlers")
DEFAULT_ROSTER_DIR = Path("roster")
DEFAULT_HEARTBEAT_INTERVAL = 15.0
DEFAULT_TICK_INTERVAL = 30.0


@dataclass(frozen=True)
class EcosystemSettings:
    """`butlers up` / `down` / `status` / `migrate`: a whole roster on one machine."""

    data_dir: Path
    roster_dir: Path
    database_url: str | None = None
    schema_prefix: str = ""
    host: str = "127.0.0.1"
    free_ports: bool = False
    log_level: str = "INFO"
    dashboard: bool = True
    dashboard_port: int = 40200

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        roster_dir: Path | None = None,
        **overrides: object,
    ) -> EcosystemSettings:
        env = os.environ if environ is None else environ
        return cls(
            data_dir=(data_dir or Path(env.get("BUTLERS_DATA_DIR", DEFAULT_DATA_DIR))).absolute(),
            roster_dir=(
                roster_dir or Path(env.get("BUTLERS_ROSTER_DIR", DEFAULT_ROSTER_DIR))
            ).absolute(),
            database_url=env.get("BUTLERS_DATABASE_URL") or None,
            log_level=env.get("BUTLERS_LOG_LEVEL", "INFO").upper(),
            **overrides,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class ButlerSettings:
    """`butlers serve`: one butler process (a pod's container, or a child of `butlers up`)."""

    spec_path: Path
    dsn: str
    schema: str | None
    host: str
    port: int | None
    log_level: str = "INFO"
    parent_pid: int | None = None
    runtime: RuntimeOverrides = field(default_factory=lambda: RuntimeOverrides())
    tick_interval: float = DEFAULT_TICK_INTERVAL
    # The process environment as read at start-up: modules look up the credentials
    # their config names here (never in os.environ).
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    approval_timeout_seconds: float | None = None
    # Registration with the switchboard (None: this butler does not register).
    switchboard_url: str | None = None
    advertise_url: str | None = None  # this butler's MCP URL as others reach it
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL
    # Tracing: OTLP/HTTP endpoint, and/or a directory of JSON-lines span files.
    otlp_endpoint: str | None = None
    span_dir: Path | None = None

    def env_value(self, name: str) -> str | None:
        """A variable of this process's start-up environment (spec.env values, API keys)."""
        return self.environ.get(name)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        spec_path: Path | None = None,
        port: int | None = None,
        host: str | None = None,
    ) -> ButlerSettings:
        env = os.environ if environ is None else environ
        spec = spec_path or (Path(env["BUTLERS_SPEC"]) if env.get("BUTLERS_SPEC") else None)
        if spec is None:
            raise ButlersError("no butler spec: pass --spec FILE or set BUTLERS_SPEC")
        dsn = env.get("BUTLERS_DSN")
        if not dsn:
            raise ButlersError(
                "no database: set BUTLERS_DSN to this butler's own role DSN "
                "(postgresql://role:password@host:port/database)"
            )
        env_port = env.get("BUTLERS_PORT")
        try:
            resolved_port = port if port is not None else (int(env_port) if env_port else None)
        except ValueError:
            raise ButlersError(f"BUTLERS_PORT={env_port!r} is not a port number") from None
        return cls(
            spec_path=spec,
            dsn=dsn,
            schema=env.get("BUTLERS_SCHEMA") or None,
            host=host or env.get("BUTLERS_HOST", "127.0.0.1"),
            port=resolved_port,
            log_level=env.get("BUTLERS_LOG_LEVEL", "INFO").upper(),
            parent_pid=int(env["BUTLERS_PARENT_PID"]) if env.get("BUTLERS_PARENT_PID") else None,
            runtime=RuntimeOverrides.from_env(env),
            tick_interval=_positive_float(env, "BUTLERS_TICK_INTERVAL", DEFAULT_TICK_INTERVAL),
            environ=dict(env),
            approval_timeout_seconds=_optional_positive_float(
                env, "BUTLERS_APPROVAL_TIMEOUT_SECONDS"
            ),
            switchboard_url=env.get("BUTLERS_SWITCHBOARD_URL") or None,
            advertise_url=env.get("BUTLERS_ADVERTISE_URL") or None,
            heartbeat_interval=_positive_float(
                env, "BUTLERS_HEARTBEAT_INTERVAL", DEFAULT_HEARTBEAT_INTERVAL
            ),
            otlp_endpoint=(
                env.get("BUTLERS_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
            ),
            span_dir=Path(env["BUTLERS_SPAN_DIR"]) if env.get("BUTLERS_SPAN_DIR") else None,
        )


@dataclass(frozen=True)
class RuntimeOverrides:
    """`BUTLERS_*` settings that override every butler's `spec.runtime` (e.g. `butlers up`)."""

    adapter: str | None = None
    model: str | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    script_url: str | None = None
    claude_path: str = "claude"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RuntimeOverrides:
        return cls(
            adapter=env.get("BUTLERS_RUNTIME_ADAPTER") or None,
            model=env.get("BUTLERS_MODEL") or None,
            openai_base_url=env.get("BUTLERS_OPENAI_BASE_URL") or None,
            openai_api_key=env.get("BUTLERS_OPENAI_API_KEY") or None,
            script_url=env.get("BUTLERS_SCRIPT_URL") or None,
            claude_path=env.get("BUTLERS_CLAUDE_PATH") or "claude",
        )


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ButlersError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ButlersError(f"{name}={raw!r} must be positive")
    return value


def _optional_positive_float(env: Mapping[str, str], name: str) -> float | None:
    return _positive_float(env, name, 0.0) if env.get(name) else None


DEFAULT_DASHBOARD_PORT = 40200
DEFAULT_DASHBOARD_ORIGINS = ("http://localhost:40173",)
MIN_TOKEN_LENGTH = 16
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class DashboardSettings:
    """`butlers dashboard` (and the dashboard child of `butlers up`)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_DASHBOARD_PORT
    # Where butlers are found: a local ecosystem's data dir, or a Kubernetes namespace.
    data_dir: Path | None = None
    kube_namespace: str | None = None
    # The dashboard role's DSN and its own schema (the audit log); None: from the data dir.
    dsn: str | None = field(default=None, repr=False)
    schema: str | None = None
    # With a token, /api/* needs it (bearer or login cookie); without, bind loopback only.
    token: str | None = field(default=None, repr=False)
    # Bearer token for the butlers' /mcp (None: `token` of ecosystem.json, if any).
    mcp_token: str | None = field(default=None, repr=False)
    cors_origins: tuple[str, ...] = DEFAULT_DASHBOARD_ORIGINS
    static_dir: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    probe_interval: float = 2.0
    keepalive_seconds: float = 30.0
    poll_interval: float = 0.5
    fan_out_timeout: float = 5.0
    discovery_interval: float = 1.0
    log_level: str = "INFO"
    parent_pid: int | None = None  # exit when this process (the supervisor) is gone
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        kube_namespace: str | None = None,
        host: str | None = None,
        port: int | None = None,
    ) -> DashboardSettings:
        env = os.environ if environ is None else environ
        raw_port = env.get("BUTLERS_DASHBOARD_PORT")
        try:
            resolved_port = port or (int(raw_port) if raw_port else DEFAULT_DASHBOARD_PORT)
        except ValueError:
            raise ButlersError(
                f"BUTLERS_DASHBOARD_PORT={raw_port!r} is not a port number"
            ) from None
        origins = env.get("BUTLERS_DASHBOARD_CORS_ORIGINS")
        static = env.get("BUTLERS_DASHBOARD_STATIC_DIR") or env.get("DASHBOARD_STATIC_DIR")
        namespace = kube_namespace or env.get("BUTLERS_DASHBOARD_KUBE_NAMESPACE") or None
        settings = cls(
            host=host or env.get("BUTLERS_DASHBOARD_HOST", "127.0.0.1"),
            port=resolved_port,
            data_dir=(
                None
                if namespace
                else (data_dir or Path(env.get("BUTLERS_DATA_DIR", DEFAULT_DATA_DIR))).absolute()
            ),
            kube_namespace=namespace,
            dsn=env.get("BUTLERS_DASHBOARD_DSN") or None,
            schema=env.get("BUTLERS_DASHBOARD_SCHEMA") or None,
            token=env.get("BUTLERS_DASHBOARD_TOKEN") or None,
            mcp_token=env.get("BUTLERS_DASHBOARD_MCP_TOKEN") or None,
            cors_origins=(
                tuple(o.strip() for o in origins.split(",") if o.strip())
                if origins is not None
                else DEFAULT_DASHBOARD_ORIGINS
            ),
            static_dir=Path(static) if static else None,
            allowed_hosts=tuple(
                h.strip() for h in env.get("BUTLERS_DASHBOARD_ALLOWED_HOSTS", "").split(",") if h
            ),
            probe_interval=_positive_float(env, "BUTLERS_DASHBOARD_PROBE_INTERVAL", 2.0),
            keepalive_seconds=_positive_float(env, "BUTLERS_DASHBOARD_KEEPALIVE", 30.0),
            poll_interval=_positive_float(env, "BUTLERS_DASHBOARD_POLL_INTERVAL", 0.5),
            fan_out_timeout=_positive_float(env, "BUTLERS_DASHBOARD_FANOUT_TIMEOUT", 5.0),
            discovery_interval=_positive_float(env, "BUTLERS_DASHBOARD_DISCOVERY_INTERVAL", 1.0),
            log_level=env.get("BUTLERS_LOG_LEVEL", "INFO").upper(),
            parent_pid=int(env["BUTLERS_PARENT_PID"]) if env.get("BUTLERS_PARENT_PID") else None,
            environ=dict(env),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse settings that would expose the API: a token is needed off loopback."""
        if self.token is not None and len(self.token) < MIN_TOKEN_LENGTH:
            raise ButlersError(
                f"BUTLERS_DASHBOARD_TOKEN is {len(self.token)} characters long; "
                f"use at least {MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 32`)"
            )
        if self.token is None and self.host not in LOOPBACK_HOSTS:
            raise ButlersError(
                f"the dashboard would listen on {self.host} without authentication: "
                "set BUTLERS_DASHBOARD_TOKEN, or listen on 127.0.0.1"
            )
