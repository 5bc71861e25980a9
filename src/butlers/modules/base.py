"""The contract every module fulfils, and what a module sees of its butler."""

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import asyncpg
from fastmcp import FastMCP
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import Response

from butlers.core.context import ButlerContext
from butlers.core.spawner import Spawner
from butlers.llm.offer import OFFERED, Tier
from butlers.migrations import Chain
from butlers.modules.briefing import BriefingSource
from butlers.modules.channels import Approver, Channel, Outbound
from butlers.oauth.google import GoogleTokens
from butlers.redaction import Redactor
from butlers.scheduling.jobs import JobRegistry
from butlers.secretbox import KeyringError

ApprovalMode = Literal["always", "conditional", "never"]
Webhook = Callable[[Request], Awaitable[Response]]


class ModuleError(Exception):
    """A module could not start; `phase` says where ("config", "credentials", ...)."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


class ModuleConfig(BaseModel):
    """Base of every module's config model: camelCase keys as in the roster, no unknown keys.

    Fields whose name ends in `_env` name environment variables the module reads (its
    credentials): a local supervisor gives a butler process those variables and no others.
    `sessionTools` (every module has it) says how this butler's LLM sessions get the
    module's tools, when not as the module declares (`Module.session_tools`).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    session_tools: Tier | None = None

    def env_names(self) -> set[str]:
        """The environment variables this configuration names."""
        return {
            value
            for name in type(self).model_fields
            if name.endswith("_env") and isinstance(value := getattr(self, name), str) and value
        }


@dataclass
class ModuleServices:
    """What the modules of one butler share.

    `spawner` runs the butler's LLM sessions (it exists before any module starts);
    `redactor` is the butler's one redaction policy (for anything a module records);
    `channels` holds each delivery channel that started (filled by `telegram` and
    `email`, used by `messenger`); `switchboard_url` is where channel connectors hand
    received messages in (`ingest_v1`; None when the butler does not register);
    `approver` is the approvals gate when that module is active; `outbound` is the
    messenger's send path when that module is active (the channel modules' own send
    tools go through it, so no send skips its checks); `jobs` is the registry `job`
    schedules name (a module registers its own jobs there when it starts); `briefings`
    each module's part of the morning briefing (served by `reminders`).
    `webhooks` are the HTTP endpoints a module receives a provider's pushes on
    (path → handler), served outside the bearer-token gate: each handler
    authenticates the provider itself.
    """

    spawner: Spawner
    redactor: Redactor
    jobs: JobRegistry = field(default_factory=JobRegistry)
    channels: dict[str, Channel] = field(default_factory=dict)
    switchboard_url: str | None = None
    approver: Approver | None = None
    outbound: Outbound | None = None
    webhooks: dict[str, Webhook] = field(default_factory=dict)
    briefings: dict[str, BriefingSource] = field(default_factory=dict)


@dataclass
class ModuleContext:
    """What a module may use: its config, the butler's pool, credentials, shared services."""

    name: str
    butler: ButlerContext
    config: Any
    services: ModuleServices

    @property
    def pool(self) -> asyncpg.Pool:
        return self.butler.pool

    @property
    def environ(self) -> Mapping[str, str]:
        return self.butler.environ

    def credential(self, env_name: str) -> str:
        """The credential `env_name`: from the butler's secrets store, the shared store, or
        the environment variable of that name (the first set wins); else a
        "credentials" failure."""
        resolver = self.butler.secrets
        try:
            value = resolver.cached(env_name) if resolver else self.butler.environ.get(env_name)
        except KeyringError as exc:
            raise ModuleError("credentials", f"module {self.name!r}: {exc}") from None
        if not value:
            raise ModuleError(
                "credentials",
                f"module {self.name!r}: {env_name} is not set: neither in the secrets store "
                f"(dashboard: Secrets) nor as an environment variable (named in "
                f"spec.modules.{self.name})",
            )
        return value

    def optional_credential(self, env_name: str) -> str | None:
        """`env_name` as `credential` finds it (store, shared store, environment), or None."""
        try:
            return self.credential(env_name)
        except ModuleError:
            return None

    async def fresh_credential(self, env_name: str) -> str | None:
        """`env_name` as stored now (a value written while the butler runs, such as an
        OAuth grant), else the environment's; None when nowhere."""
        if self.butler.secrets is None:
            return self.butler.environ.get(env_name) or None
        return await self.butler.secrets.get(env_name)

    def google_tokens(self) -> GoogleTokens:
        """Access tokens from the Google grant the dashboard stored (shared secrets
        `GOOGLE_OAUTH_*`): keep the object and `await tokens.access_token()` before each
        call to Google; it refreshes a minute before expiry and raises
        `butlers.oauth.google.OAuthError` ("not_configured", "invalid_grant", ...)."""
        return GoogleTokens(self.fresh_credential, self.butler.google_token_url)


def tool_meta(
    module: str, approval_mode: ApprovalMode = "never", sensitive_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The `meta` of a module's tool: owner module and approval policy."""
    meta: dict[str, Any] = {"module": module}
    if approval_mode != "never":
        meta["approval_mode"] = approval_mode
        meta["sensitive_args"] = list(sensitive_args)
    return meta


def migration_chain(name: str, package_file: str) -> Chain:
    """The chain whose scripts live in `<package>/migrations`."""
    return Chain(name, Path(package_file).parent / "migrations")


class Module:
    """One capability. Subclasses set the class attributes and override the hooks."""

    name: ClassVar[str]
    config_model: ClassVar[type[BaseModel]] = ModuleConfig
    dependencies: ClassVar[tuple[str, ...]] = ()
    # Started first when also enabled, used when active, never a reason to fail.
    optional_dependencies: ClassVar[tuple[str, ...]] = ()
    chain: ClassVar[Chain | None] = None
    # Tools of this module that an LLM session of the butler must not see.
    session_hidden_tools: ClassVar[tuple[str, ...]] = ()
    # Why the owner may not switch this module off while the butler runs (None: they
    # may; a required module is only removed from `spec.modules`).
    required: ClassVar[str | None] = None
    # The jobs (`ModuleServices.jobs`) this module registers when it starts, so the
    # spec's schedules naming them still validate while it is switched off.
    owned_jobs: ClassVar[tuple[str, ...]] = ()
    # How a session gets the others (`llm.offer`): "offered" with every model request
    # (the butler's own domain), or "on_request" (what every butler shares: the model
    # loads them when it needs them). A butler changes it with `sessionTools`.
    session_tools: ClassVar[Tier] = OFFERED

    async def start(self, ctx: ModuleContext) -> None:
        """Check credentials, open clients; raise ModuleError to fail cleanly."""

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        """Register this module's tools (with `meta=tool_meta(name, ...)`)."""

    async def ready(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        """Called once every active module has registered its tools."""

    async def tools_changed(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        """Called when the owner switched another module on or off while this one runs
        (its tools came or went)."""

    async def credentials_changed(self, ctx: ModuleContext, names: frozenset[str]) -> None:
        """Credentials `names` now resolve to other values (written, rotated or deleted
        while the butler runs; `ctx.credential` gives the new ones). A module holding a
        client built from one of them rebuilds it here; by default nothing."""

    async def stop(self) -> None:
        """Cancel background tasks and close clients."""
