"""Holding gated tool calls until a human approves, denies, or the deadline passes.

Each tool's policy comes from its `meta` (`approval_mode`, `sensitive_args`) and is
overridden by `spec.approvals.rules`. A held call keeps no database connection: it
polls its `approvals` row briefly and often until the deadline.
"""

import logging
from dataclasses import dataclass
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext

from butlers.llm.toolbox import SESSION_META_KEY
from butlers.modules.approvals.store import ApprovalStore
from butlers.redaction import Redactor
from butlers.spec import ApprovalsSpec
from butlers.waiting import WaitTimeout, wait_until

log = logging.getLogger(__name__)
POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class Policy:
    mode: str  # "always" | "conditional"
    sensitive_args: tuple[str, ...]
    defaults: dict[str, Any]

    def requires_approval(self, arguments: dict[str, Any]) -> bool:
        if self.mode == "always":
            return True
        return any(
            _non_trivial(arguments.get(arg), self.defaults.get(arg)) for arg in self.sensitive_args
        )


def _non_trivial(value: Any, default: Any) -> bool:
    if value is None or value is False or value in ("", [], {}):
        return False
    return bool(value != default)


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


class ApprovalGate(Middleware):
    def __init__(self, store: ApprovalStore, timeout: float, redactor: Redactor) -> None:
        self._store = store
        self._timeout = timeout
        self._redactor = redactor
        self.policies: dict[str, Policy] = {}

    async def refresh(self, mcp: FastMCP, spec: ApprovalsSpec) -> None:
        self.policies = build_policies(list(await mcp.list_tools()), spec)

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        name = context.message.name
        arguments = dict(context.message.arguments or {})
        policy = self.policies.get(name)
        if policy is None or not policy.requires_approval(arguments):
            return await call_next(context)
        session_id = _session_id(context)
        # The row shows the approver the call (secrets and credentials masked); the call
        # itself runs with the real arguments.
        recorded = self._redactor.value(arguments)
        approval_id = await self._store.request(name, recorded, session_id, self._timeout)
        log.info("holding %s for approval %s", name, approval_id)
        status = await self._wait(approval_id)
        if status == "approved":
            return await call_next(context)
        row = await self._store.get(approval_id) or {}
        if status == "denied":
            raise ToolError(
                f"{name} was denied (approval {approval_id}) by {row.get('decided_by')}"
                + (f": {row['reason']}" if row.get("reason") else "")
            )
        raise ToolError(
            f"{name} needed approval {approval_id}, which expired after {self._timeout:g} s "
            f"without a decision; nothing was done"
        )

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


def _session_id(context: MiddlewareContext) -> str | None:
    """The spawner's session making the call (from the request's `_meta`), else the MCP
    session of a direct caller."""
    ctx = context.fastmcp_context
    if ctx is None:
        return None
    try:
        meta = ctx.request_context.meta if ctx.request_context is not None else None
    except (AttributeError, RuntimeError):
        meta = None
    session = _meta_value(meta, SESSION_META_KEY)
    if session:
        return str(session)
    try:
        return str(ctx.session_id)
    except RuntimeError:
        return None


def _meta_value(meta: object, key: str) -> object:
    if isinstance(meta, dict):
        return meta.get(key)
    return getattr(meta, "model_extra", {}).get(key) if meta is not None else None
