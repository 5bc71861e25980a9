"""Settings of each deployable, built once at start-up from arguments and `BUTLERS_*`.

This is the only module that reads environment variables.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from butlers.errors import ButlersError

DEFAULT_DATA_DIR = Path(".butlers")
DEFAULT_ROSTER_DIR = Path("roster")
DEFAULT_HEARTBEAT_INTERVAL = 15.0
DEFAULT_TICK_INTERVAL = 30.0
DEFAULT_SECRETS_RELOAD_SECONDS = 10.0
# Secrets of the butler itself: read into settings, kept out of `environ` (what modules
# and sessions may draw credentials from).
AUTH_SECRET_VARS = (
    "BUTLERS_TOKEN",
    "BUTLERS_REGISTRATION_KEY",
    "BUTLERS_SECRETS_KEY",
    "BUTLERS_SECRETS_KEY_FILE",
)
_DIGEST_CHARS = frozenset("0123456789abcdef")
_LABEL = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
DEFAULT_MAX_QUEUED_SESSIONS = 32
# Connections of a butler's database pool (BUTLERS_POOL_MIN_SIZE, BUTLERS_POOL_MAX_SIZE).
DEFAULT_POOL_SIZES = (1, 10)
DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024

# What a butler process of a local ecosystem inherits from the supervisor's environment,
# besides the variables its own spec names (spec.env, module credentials, runtime key):
# enough of the OS to run Python and reach the network, and the `BUTLERS_*` settings
# `ButlerSettings` reads. Never the rest (other butlers' credentials, the admin DSN).
OS_ENVIRONMENT = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
    "https_proxy", "no_proxy",
)  # fmt: skip
BUTLER_SETTINGS_ENVIRONMENT = (
    "BUTLERS_RUNTIME_ADAPTER", "BUTLERS_MODEL", "BUTLERS_OPENAI_BASE_URL",
    "BUTLERS_OPENAI_API_KEY", "BUTLERS_SCRIPT_URL", "BUTLERS_CLAUDE_PATH",
    "BUTLERS_TICK_INTERVAL", "BUTLERS_APPROVAL_TIMEOUT_SECONDS", "BUTLERS_HEARTBEAT_INTERVAL",
    "BUTLERS_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "BUTLERS_SPAN_DIR",
    "BUTLERS_LOG_LEVEL", "BUTLERS_MAX_QUEUED_SESSIONS", "BUTLERS_LOG_MAX_BYTES", "BUTLERS_PRICES",
    "BUTLERS_POOL_MIN_SIZE", "BUTLERS_POOL_MAX_SIZE",
    "BUTLERS_MCP_FAST_PATH", "BUTLERS_GOOGLE_AUTH_URL", "BUTLERS_GOOGLE_TOKEN_URL",
)  # fmt: skip
GOOGLE_AUTH_URL = "https://accounts.google.com/o/oauth2/v2/auth"
GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"


def dashboard_login_off(environ: Mapping[str, str]) -> bool:
    """`BUTLERS_DASHBOARD_NO_LOGIN` (`--no-login`): the dashboard answers everyone on loopback."""
    return _flag(environ, "BUTLERS_DASHBOARD_NO_LOGIN")


def runtime_adapter(environ: Mapping[str, str]) -> str | None:
    """`BUTLERS_RUNTIME_ADAPTER` of an environment a butler will get (the dev/CI switch)."""
    return environ.get("BUTLERS_RUNTIME_ADAPTER") or None


@dataclass(frozen=True)
class MigrateSettings:
    """`butlers migrate --spec`: one butler's chains, as its own role (a pod's init step)."""

    dsn: str = field(repr=False)
    schema: str | None
    reader_role: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MigrateSettings:
        env = os.environ if environ is None else environ
        dsn = env.get("BUTLERS_DSN")
        if not dsn:
            raise ButlersError("BUTLERS_DSN is not set: the butler's own role DSN is needed")
        return cls(
            dsn=dsn,
            schema=env.get("BUTLERS_SCHEMA") or None,
            reader_role=env.get("BUTLERS_DASHBOARD_ROLE") or None,
        )


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
    log_file: Path | None = None  # the supervisor's own log (rotated); None: stderr
    dashboard: bool = True
    dashboard_port: int = 40200

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        roster_dir: Path | None = None,
    ) -> EcosystemSettings:
        env = os.environ if environ is None else environ
        return cls(
            data_dir=(data_dir or Path(env.get("BUTLERS_DATA_DIR", DEFAULT_DATA_DIR))).absolute(),
            roster_dir=(
                roster_dir or Path(env.get("BUTLERS_ROSTER_DIR", DEFAULT_ROSTER_DIR))
            ).absolute(),
            database_url=env.get("BUTLERS_DATABASE_URL") or None,
            log_level=env.get("BUTLERS_LOG_LEVEL", "INFO").upper(),
            log_file=Path(env["BUTLERS_LOG_FILE"]) if env.get("BUTLERS_LOG_FILE") else None,
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
    # Model prices on top of the built-in table: model → (input, output, cache read,
    # cache write) USD per Mtok (the cache rates None when not given).
    prices: Mapping[str, PriceEntry] = field(default_factory=dict)
    auth: AuthSettings = field(default_factory=lambda: AuthSettings())
    # Sessions running or waiting per butler; beyond it `trigger` answers "busy".
    max_queued_sessions: int = DEFAULT_MAX_QUEUED_SESSIONS
    # This process's log file, rotated at `log_max_bytes` (None: stderr, as in a pod).
    log_file: Path | None = None
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    # Connections of the butler's database pool, fewest and most.
    pool_sizes: tuple[int, int] = DEFAULT_POOL_SIZES
    # The MCP fast path (`daemon/direct.py`: plain `tools/call`s answered without the SDK's
    # transport; it leans on private names of FastMCP and the SDK). Off: the SDK answers all.
    mcp_fast_path: bool = True
    # The secrets store: its keyring (a value, or a file re-read on rotation), and the
    # schema of the shared store (the dashboard's; None: no shared store).
    secrets_key: str | None = field(default=None, repr=False)
    secrets_key_file: Path | None = None
    shared_secrets_schema: str | None = None
    # How often the stores are checked for values changed by another process (the
    # dashboard's shared store): a change reaches the running modules within this.
    secrets_reload_seconds: float = DEFAULT_SECRETS_RELOAD_SECONDS
    google: GoogleEndpoints = field(default_factory=lambda: GoogleEndpoints())

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
            mcp_fast_path=not env.get("BUTLERS_MCP_FAST_PATH", "").strip()
            or _flag(env, "BUTLERS_MCP_FAST_PATH"),
            tick_interval=_positive_float(env, "BUTLERS_TICK_INTERVAL", DEFAULT_TICK_INTERVAL),
            environ={k: v for k, v in env.items() if k not in AUTH_SECRET_VARS},
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
            prices=parse_prices(env.get("BUTLERS_PRICES") or ""),
            auth=AuthSettings.from_env(env),
            max_queued_sessions=_positive_int(
                env, "BUTLERS_MAX_QUEUED_SESSIONS", DEFAULT_MAX_QUEUED_SESSIONS
            ),
            log_file=Path(env["BUTLERS_LOG_FILE"]) if env.get("BUTLERS_LOG_FILE") else None,
            log_max_bytes=_positive_int(env, "BUTLERS_LOG_MAX_BYTES", DEFAULT_LOG_MAX_BYTES),
            pool_sizes=_pool_sizes(env),
            secrets_key=env.get("BUTLERS_SECRETS_KEY") or None,
            secrets_key_file=_path(env, "BUTLERS_SECRETS_KEY_FILE"),
            shared_secrets_schema=env.get("BUTLERS_SHARED_SECRETS_SCHEMA") or None,
            secrets_reload_seconds=_positive_float(
                env, "BUTLERS_SECRETS_RELOAD_SECONDS", DEFAULT_SECRETS_RELOAD_SECONDS
            ),
            google=GoogleEndpoints.from_env(env),
        )


@dataclass(frozen=True)
class GoogleEndpoints:
    """Google's OAuth 2.0 endpoints (BUTLERS_GOOGLE_AUTH_URL, BUTLERS_GOOGLE_TOKEN_URL) and
    the dashboard's callback as registered with Google (BUTLERS_GOOGLE_REDIRECT_URI; None:
    the URL the browser reached the dashboard at, plus /api/oauth/google/callback)."""

    auth_url: str = GOOGLE_AUTH_URL
    token_url: str = GOOGLE_TOKEN_URL
    redirect_uri: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GoogleEndpoints:
        for name in ("BUTLERS_GOOGLE_AUTH_URL", "BUTLERS_GOOGLE_TOKEN_URL"):
            value = env.get(name)
            if value and not value.startswith(("https://", "http://")):
                raise ButlersError(f"{name}={value!r} is not an http(s) URL")
        return cls(
            auth_url=env.get("BUTLERS_GOOGLE_AUTH_URL") or GOOGLE_AUTH_URL,
            token_url=env.get("BUTLERS_GOOGLE_TOKEN_URL") or GOOGLE_TOKEN_URL,
            redirect_uri=env.get("BUTLERS_GOOGLE_REDIRECT_URI") or None,
        )


def _path(env: Mapping[str, str], name: str) -> Path | None:
    return Path(env[name]) if env.get(name) else None


@dataclass(frozen=True)
class AuthSettings:
    """Who this butler lets in, and the token it presents to others.

    BUTLERS_USER_TOKEN_SHA256   `[label=]digest,…` of the user tokens (full access); a
                                butler refuses to serve without one
    BUTLERS_TOKEN               this butler's own token (to the switchboard; the switchboard's
                                to the butlers it routes to)
    BUTLERS_SWITCHBOARD_TOKEN_SHA256   digest of the switchboard's token (may call `trigger`)
    BUTLERS_REGISTRATION_KEY    the switchboard only: verifies every butler's own token
    BUTLERS_ALLOWED_HOSTS       host names this butler answers besides loopback and IPs
    BUTLERS_ALLOWED_ORIGINS     browser origins allowed besides loopback ones
    """

    user_tokens: Mapping[str, str] = field(default_factory=dict)  # digest -> label
    token: str | None = field(default=None, repr=False)
    switchboard_token_sha256: str | None = None
    registration_key: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    def require_users(self) -> None:
        """A butler serves only callers with a token: without a user token nobody could
        use it (and nobody could decide its approvals)."""
        if not self.user_tokens:
            raise ButlersError(
                "BUTLERS_USER_TOKEN_SHA256 is not set: a butler serves only callers with a "
                "token; set it to the SHA-256 of the user's token (`butlers up` and the "
                'operator do), e.g. $(printf %s "$TOKEN" | sha256sum | cut -c1-64)'
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthSettings:
        raw_users = env.get("BUTLERS_USER_TOKEN_SHA256", "")
        try:
            users = parse_user_digests(raw_users)
        except ValueError as exc:
            raise ButlersError(f"BUTLERS_USER_TOKEN_SHA256: {exc}") from None
        switchboard = env.get("BUTLERS_SWITCHBOARD_TOKEN_SHA256") or None
        if switchboard is not None and not _is_digest(switchboard):
            raise ButlersError(
                "BUTLERS_SWITCHBOARD_TOKEN_SHA256 must be a SHA-256 hex digest (64 of 0-9a-f)"
            )
        key = env.get("BUTLERS_REGISTRATION_KEY") or None
        if key is not None and len(key) < 32:
            raise ButlersError("BUTLERS_REGISTRATION_KEY must be at least 32 characters")
        return cls(
            user_tokens=users,
            token=env.get("BUTLERS_TOKEN") or None,
            switchboard_token_sha256=switchboard,
            registration_key=key,
            allowed_hosts=_csv(env.get("BUTLERS_ALLOWED_HOSTS")),
            allowed_origins=_csv(env.get("BUTLERS_ALLOWED_ORIGINS")),
        )


def parse_user_digests(raw: str) -> dict[str, str]:
    """`[label=]digest,…` → {digest: label}; ValueError naming the bad entry."""
    result: dict[str, str] = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        label, _, value = entry.rpartition("=")
        label = label or "user"
        if not _LABEL.match(label) or not _is_digest(value):
            raise ValueError(
                f"{entry[:80]!r} is not [label=]<SHA-256 hex digest of a token>, e.g. "
                '$(printf %s "$TOKEN" | sha256sum | cut -c1-64)'
            )
        result[value] = label
    return result


def _is_digest(value: str) -> bool:
    return len(value) == 64 and set(value) <= _DIGEST_CHARS


def _csv(raw: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())


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


PRICE_FIELDS = ("input_per_mtok", "output_per_mtok")
CACHE_PRICE_FIELDS = ("cache_read_per_mtok", "cache_write_per_mtok")
PriceEntry = tuple[float, float, float | None, float | None]


def parse_prices(text: str, name: str = "BUTLERS_PRICES") -> dict[str, PriceEntry]:
    """`{"model": {"input_per_mtok": 3, "output_per_mtok": 15}, ...}` (USD per million
    tokens, optionally with `cache_read_per_mtok` and `cache_write_per_mtok`) as
    model → (input, output, cache read, cache write); errors name the variable, model
    and field."""
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ButlersError(f"{name} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ButlersError(f"{name} must be a JSON object of model → prices")
    prices: dict[str, PriceEntry] = {}
    for model, entry in raw.items():
        if (
            not isinstance(entry, dict)
            or not set(PRICE_FIELDS) <= set(entry)
            or not set(entry) <= set(PRICE_FIELDS + CACHE_PRICE_FIELDS)
        ):
            raise ButlersError(
                f"{name}[{model!r}] must be an object with {' and '.join(PRICE_FIELDS)}, "
                f"and optionally {' and '.join(CACHE_PRICE_FIELDS)}"
            )
        values: dict[str, float] = {}
        for key, value in entry.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ButlersError(
                    f"{name}[{model!r}].{key}={value!r} must be a non-negative number "
                    "(USD per million tokens)"
                )
            values[key] = float(value)
        prices[model] = (
            values["input_per_mtok"],
            values["output_per_mtok"],
            values.get("cache_read_per_mtok"),
            values.get("cache_write_per_mtok"),
        )
    return prices


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


def _pool_sizes(env: Mapping[str, str]) -> tuple[int, int]:
    low = _positive_int(env, "BUTLERS_POOL_MIN_SIZE", DEFAULT_POOL_SIZES[0])
    high = _positive_int(env, "BUTLERS_POOL_MAX_SIZE", max(DEFAULT_POOL_SIZES[1], low))
    if low > high:
        raise ButlersError(
            f"BUTLERS_POOL_MIN_SIZE={low} is more than BUTLERS_POOL_MAX_SIZE={high}: "
            "the pool's fewest connections cannot exceed its most"
        )
    return low, high


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ButlersError(f"{name}={raw!r} is not a whole number") from None
    if value <= 0:
        raise ButlersError(f"{name}={raw!r} must be positive")
    return value


def _fingerprints(raw: str | None) -> tuple[tuple[int, str, str], ...]:
    if not raw:
        return ()
    try:
        return tuple((int(n), str(p), str(d)) for n, p, d in json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise ButlersError(
            f"BUTLERS_DASHBOARD_MASK_DIGESTS is not a list of fingerprints: {exc}"
        ) from None


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ButlersError(f"{name}={raw!r}: use 1 or 0")


def _optional_positive_float(env: Mapping[str, str], name: str) -> float | None:
    return _positive_float(env, name, 0.0) if env.get(name) else None


DEFAULT_DASHBOARD_PORT = 40200
# No cross-origin caller by default (`dev.py ui-dev` allows its dev server's origin).
DEFAULT_DASHBOARD_ORIGINS: tuple[str, ...] = ()
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
    # /api/* needs a login (this token, else the user's token of the ecosystem, as a
    # bearer or through a login's session cookie); `login=False` (--no-login): nothing,
    # on loopback only.
    token: str | None = field(default=None, repr=False)
    login: bool = True
    user: str | None = None  # the identity a login acts as (default: the OS account)
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
    # Butler resources on Kubernetes: an explicit API server (test API servers), and the
    # schema prefix the operator provisions with.
    kube_api: str | None = None
    kube_token: str | None = field(default=None, repr=False)
    schema_prefix: str = ""
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Fingerprints of secrets to mask that this process is not given (`masking.py`).
    mask_fingerprints: tuple[tuple[int, str, str], ...] = field(default=(), repr=False)
    secrets_key: str | None = field(default=None, repr=False)
    secrets_key_file: Path | None = None
    google: GoogleEndpoints = field(default_factory=lambda: GoogleEndpoints())

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
            login=not _flag(env, "BUTLERS_DASHBOARD_NO_LOGIN"),
            user=env.get("BUTLERS_DASHBOARD_USER") or None,
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
            kube_api=env.get("BUTLERS_KUBE_API") or None,
            kube_token=env.get("BUTLERS_KUBE_TOKEN") or None,
            schema_prefix=env.get("BUTLERS_DASHBOARD_SCHEMA_PREFIX", ""),
            environ=dict(env),
            mask_fingerprints=_fingerprints(env.get("BUTLERS_DASHBOARD_MASK_DIGESTS")),
            secrets_key=env.get("BUTLERS_SECRETS_KEY") or None,
            secrets_key_file=_path(env, "BUTLERS_SECRETS_KEY_FILE"),
            google=GoogleEndpoints.from_env(env),
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
        if not self.login and self.host not in LOOPBACK_HOSTS:
            raise ButlersError(
                f"the dashboard would listen on {self.host} without a login: "
                "drop --no-login (BUTLERS_DASHBOARD_NO_LOGIN), or listen on 127.0.0.1"
            )

    def identity(self) -> str:
        """Who a login acts as: `user`, else the OS account running the dashboard."""
        if self.user:
            return self.user
        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return "owner"
