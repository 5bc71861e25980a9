"""Holding gated tool calls until a person approves, denies, or the deadline passes.

Each tool's policy comes from its `meta` (`approval_mode`, `sensitive_args`) and is
overridden by `spec.approvals.rules`. A call's arguments are validated exactly as the
tool itself would validate them *before* anything is held, so a junk call is refused
at once and leaves no row. A held call keeps no database connection: it polls its
`approvals` row briefly and often until the deadline. A session's held call steps
aside (the butler's other sessions run meanwhile). When the caller goes away (its
request is cancelled: the client left, the session timed out) the request expires
at once, so no later decision can be recorded for a call that will never run.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from pydantic import ValidationError

from butlers.auth.identity import current_mcp_session
from butlers.auth.middleware import caller_identity
from butlers.core.baton import SessionEnded
from butlers.core.spawner import Spawner
from butlers.modules.approvals.store import ApprovalStore
from butlers.redaction import Redactor
from butlers.signatures import Validator, arguments_validator, describe
from butlers.spec import ApprovalsSpec
from butlers.waiting import WaitTimeout, wait_until

log = logging.getLogger(__name__)
POLL_INTERVAL = 0.05
CALLER_GONE = "the caller went away before a decision; nothing was done"


@dataclass(frozen=True)
class Policy:
    mode: str  # "always" | "conditional"
    sensitive_args: tuple[str, ...]
    defaults: dict[str, Any]

    def requires_approval(self, arguments: dict[str, Any]) -> bool:
        if self.mode == "always":
            return True
        return any(_changes(arguments, arg, self.defaults.get(arg)) for arg in self.sensitive_args)


def _changes(arguments: dict[str, Any], arg: str, default: Any) -> bool:
    """A sensitive argument counts when it is given and differs from its default:
    clearing a field ("" or []) is as much a change as setting it."""
    if arg not in arguments or arguments[arg] is None:
        return False
    return bool(arguments[arg] != default)


def build_policies(tools: list[Any], spec: ApprovalsSpec) -> dict[str, Policy]:
    """Tool name → policy, for every tool that may need approval."""
    rules = {rule.tool: rule for rule in spec.rules}
    policies: dict[str, Policy] = {}
    for tool in tools:
        meta = tool.meta or {}
        mode = meta.get("approval_mode", "never")
        sensitive = tuple(meta.get("sensitive_args", ()))
        rule = rules.get(tool.name)
        if rule is not None:
            mode = rule.mode
            sensitive = tuple(rule.sensitive_args) or sensitive
        if mode == "never":
            continue
        properties = (tool.parameters or {}).get("properties", {})
        defaults = {name: prop.get("default") for name, prop in properties.items()}
        policies[tool.name] = Policy(mode, sensitive, defaults)
    return policies


def build_validator(tool: Any) -> Validator:
    """Validates arguments as the tool itself would, without running it."""
    fn = getattr(tool, "fn", None)
    return arguments_validator(fn) if fn is not None else (lambda arguments: None)


def _validation_message(tool: str, exc: ValidationError) -> str:
    return f"invalid arguments for {tool}: {describe(exc)} (nothing was held or done)"


class ApprovalGate(Middleware):
    def __init__(
        self,
        store: ApprovalStore,
        timeout: float,
        redactor: Redactor,
        spawner: Spawner | None = None,
    ) -> None:
        self._store = store
        self._timeout = timeout
        self._redactor = redactor
        self._spawner = spawner
        self.policies: dict[str, Policy] = {}
        self._validators: dict[str, Validator] = {}

    async def refresh(self, mcp: FastMCP, spec: ApprovalsSpec) -> None:
        tools = list(await mcp.list_tools())
        self.policies = build_policies(tools, spec)
        self._validators = {t.name: build_validator(t) for t in tools if t.name in self.policies}

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        name = context.message.name
        arguments = dict(context.message.arguments or {})
        policy = self.policies.get(name)
        if policy is None or not policy.requires_approval(arguments):
            return await call_next(context)
        try:
            self._validators[name](arguments)
        except ValidationError as exc:
            raise ToolError(_validation_message(name, exc)) from None
        identity = caller_identity(context)
        session_id = identity.name if identity and identity.kind == "session" else None
        # The row shows the approver the call (secrets and credentials masked); the call
        # itself runs with the real arguments.
        recorded = self._redactor.value(arguments)
        approval_id = await self._store.request(
            name, recorded, session_id or _mcp_session(context), self._timeout
        )
        log.info("holding %s for approval %s", name, approval_id)
        try:
            status = await self._hold(approval_id, session_id)
        except SessionEnded:
            raise ToolError(
                f"{name}: the session ended while approval {approval_id} was pending"
            ) from None
        if status == "approved":
            return await call_next(context)
        row = await self._store.get(approval_id)
        if status == "denied":
            decided_by, reason = (row.decided_by, row.reason) if row else (None, None)
            raise ToolError(
                f"{name} was denied (approval {approval_id}) by {decided_by}"
                + (f": {reason}" if reason else "")
            )
        raise ToolError(
            f"{name} needed approval {approval_id}, which expired after {self._timeout:g} s "
            f"without a decision; nothing was done"
        )

    async def _hold(self, approval_id: Any, session_id: str | None) -> str:
        spawner = self._spawner
        try:
            if spawner is not None and session_id is not None:
                async with spawner.stepping_aside(session_id):
                    return await self._wait(approval_id)
            return await self._wait(approval_id)
        except asyncio.CancelledError:
            await asyncio.shield(self._store.expire(approval_id, CALLER_GONE))
            log.info("approval %s expired: %s", approval_id, CALLER_GONE)
            raise

    async def _wait(self, approval_id: Any) -> str:
        async def decided() -> str | None:
            status = await self._store.status(approval_id)
            return None if status == "pending" else status

        try:
            return await wait_until(decided, timeout=self._timeout, interval=POLL_INTERVAL)
        except WaitTimeout:
            pass
        if await self._store.expire(approval_id):
            return "expired"
        return await self._store.status(approval_id)


def _mcp_session(context: MiddlewareContext) -> str | None:
    """The MCP session of a direct caller (for the audit trail)."""
    direct = current_mcp_session.get()
    if direct is not None:
        return direct
    ctx = context.fastmcp_context
    if ctx is None:
        return None
    try:
        return str(ctx.session_id)
    except RuntimeError:
        return None
