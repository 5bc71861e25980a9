"""Holding gated tool calls until a person approves, denies, or the deadline passes.

Each tool's policy comes from its `meta` (`approval_mode`, `sensitive_args`) and is
overridden by `spec.approvals.rules`. A call's arguments are validated exactly as the
tool itself would validate them *before* anything is held, so a junk call is refused
at once and leaves no row. A held call keeps no database connection: it polls its
`approvals` row briefly and often until the deadline. A session's held call steps
aside (the butler's other sessions run meanwhile). When the caller goes away (its
request is cancelled: the client left, the session timed out) the request expires
at once, so no later decision can be recorded for a call that will never run.

A held call outlives a database outage: polls that fail are retried until the
deadline, so a decision taken once the database is back reaches the call. A call
that gives up while the database is away (its deadline passed) cannot mark its row
then; the gate expires it as soon as the database answers again. A decision is only
recorded for a call this process still holds (`holds`), and an approval reports
success only once the held call has started (`deliver`): approving a request whose
call is gone expires it instead, and says so.
"""

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import asyncpg
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

log = logging.getLogger(__name__)
POLL_INTERVAL = 0.05
POLL_TIMEOUT = 5.0  # one status read; past it the database counts as away
START_TIMEOUT = 10.0  # how long an approval waits for the held call to start
EXPIRE_RETRY_MAX = 10.0  # longest pause between attempts to expire a lost request
KEPT_OUTCOMES = 1000  # recent held calls whose start a late `deliver` may still ask about
CALLER_GONE = "the caller went away before a decision; nothing was done"
DATABASE_AWAY = (
    "the database could not be reached until the deadline passed; the held call "
    "gave up and nothing was done"
)
NOT_HELD = "no call is waiting for this request any more (nothing was done)"
# The database (or the connection to it) is away, as opposed to a query that failed.
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,
)


@dataclass
class _Held:
    """A call held in this process: the decision handed to it, and whether it started."""

    decision: asyncio.Future[str] = field(default_factory=asyncio.Future)
    started: asyncio.Future[bool] = field(default_factory=asyncio.Future)


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
        self._held: dict[uuid.UUID, _Held] = {}
        # id -> (the decision the call acted on, whether it started)
        self._finished: OrderedDict[uuid.UUID, tuple[str | None, bool]] = OrderedDict()
        self._lost: set[uuid.UUID] = set()  # given up while the database was away
        self._expirer: asyncio.Task[None] | None = None

    def holds(self, approval_id: uuid.UUID) -> bool:
        """Whether a call of this process is still waiting for this request."""
        return approval_id in self._held

    async def deliver(self, approval_id: uuid.UUID, status: str) -> bool:
        """Hand a recorded decision to its held call; for an approval, wait until the
        call has started. False when no call took it (the call is gone)."""
        held = self._held.get(approval_id)
        if held is None:  # the call already ended: did it act on this decision?
            seen, started = self._finished.get(approval_id, (None, False))
            return seen == status and (started or status != "approved")
        if not held.decision.done():
            held.decision.set_result(status)
        if status != "approved":
            return True
        try:
            async with asyncio.timeout(START_TIMEOUT):
                return await asyncio.shield(held.started)
        except TimeoutError:
            return False

    async def aclose(self) -> None:
        if self._expirer is not None:
            self._expirer.cancel()
            await asyncio.gather(self._expirer, return_exceptions=True)

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
        approval_id, status = await self._decide(
            name, arguments, session_id, session_id or _mcp_session(context)
        )
        if status == "approved":
            return await call_next(context)
        raise ToolError(await self.refusal(name, approval_id, status))

    async def hold(
        self, name: str, arguments: dict[str, Any], session_id: str | None
    ) -> tuple[uuid.UUID, str]:
        """Hold one action a tool is about to take until the owner decides, as a gated
        call is held: `(approval id, "approved" | "denied" | "expired" | "lost")`. For a
        tool that decides from its arguments and state whether it needs approval (an
        outbound send to a recipient the owner has not allowed). On "approved" the
        caller must act at once (the approver is told the action started)."""
        return await self._decide(name, arguments, session_id, session_id)

    async def _decide(
        self,
        name: str,
        arguments: dict[str, Any],
        session_id: str | None,
        requester: str | None,
    ) -> tuple[uuid.UUID, str]:
        # The row shows the approver the call (secrets and credentials masked); the call
        # itself runs with the real arguments.
        recorded = self._redactor.value(arguments)
        approval_id = await self._store.request(name, recorded, requester, self._timeout)
        log.info("holding %s for approval %s", name, approval_id)
        held = self._held[approval_id] = _Held()
        started = False
        status: str | None = None
        try:
            try:
                status = await self._hold(approval_id, session_id, held)
            except SessionEnded:
                raise ToolError(
                    f"{name}: the session ended while approval {approval_id} was pending"
                ) from None
            if status == "approved":
                started = True
                held.started.set_result(True)
            return approval_id, status
        finally:
            self._held.pop(approval_id, None)
            if not held.started.done():
                held.started.set_result(False)
            self._finished[approval_id] = (status, started)
            while len(self._finished) > KEPT_OUTCOMES:
                self._finished.popitem(last=False)

    async def refusal(self, name: str, approval_id: uuid.UUID, status: str) -> str:
        """Why a held call did not run, for its caller."""
        if status == "lost":
            return f"{name} needed approval {approval_id}, but {DATABASE_AWAY}; ask again"
        if status == "denied":
            row = await self._store.get(approval_id)
            decided_by, reason = (row.decided_by, row.reason) if row else (None, None)
            return f"{name} was denied (approval {approval_id}) by {decided_by}" + (
                f": {reason}" if reason else ""
            )
        return (
            f"{name} needed approval {approval_id}, which expired after {self._timeout:g} s "
            f"without a decision; nothing was done"
        )

    async def _hold(self, approval_id: uuid.UUID, session_id: str | None, held: _Held) -> str:
        spawner = self._spawner
        try:
            if spawner is not None and session_id is not None:
                async with spawner.stepping_aside(session_id):
                    return await self._wait(approval_id, held)
            return await self._wait(approval_id, held)
        except asyncio.CancelledError:
            await asyncio.shield(self._expire(approval_id, CALLER_GONE))
            raise

    async def _wait(self, approval_id: uuid.UUID, held: _Held) -> str:
        """The decision: handed over in process, or read from the row (reads that fail
        while the database is away are retried until the deadline)."""
        deadline = time.monotonic() + self._timeout
        away_since: float | None = None
        while time.monotonic() < deadline:
            if held.decision.done():
                return held.decision.result()
            try:
                async with asyncio.timeout(POLL_TIMEOUT):
                    status = await self._store.status(approval_id)
            except UNAVAILABLE as exc:
                if away_since is None:
                    away_since = time.monotonic()
                    log.warning(
                        "approval %s: the database is away (%s); the call stays held until "
                        "its deadline",
                        approval_id,
                        exc.__class__.__name__,
                    )
            else:
                if away_since is not None:
                    log.info("approval %s: the database is back", approval_id)
                    away_since = None
                if status != "pending":
                    return status
            try:
                async with asyncio.timeout(
                    max(0.0, min(POLL_INTERVAL, deadline - time.monotonic()))
                ):
                    await asyncio.shield(held.decision)
            except TimeoutError:
                pass
        if held.decision.done():
            return held.decision.result()
        try:
            if await self._store.expire(approval_id):
                return "expired"
            return await self._store.status(approval_id)
        except UNAVAILABLE:
            self._expire_later(approval_id)
            return "lost"

    async def _expire(self, approval_id: uuid.UUID, reason: str) -> None:
        try:
            await self._store.expire(approval_id, reason)
            log.info("approval %s expired: %s", approval_id, reason)
        except UNAVAILABLE:
            self._expire_later(approval_id)

    def _expire_later(self, approval_id: uuid.UUID) -> None:
        """Mark a request whose call gave up while the database was away `expired` as
        soon as the database answers again (retried with back-off until then)."""
        self._lost.add(approval_id)
        log.warning(
            "approval %s: its call gave up while the database was away; the request will "
            "be expired once the database is back",
            approval_id,
        )
        if self._expirer is None or self._expirer.done():
            self._expirer = asyncio.create_task(self._expire_lost(), name="approvals expirer")

    async def _expire_lost(self) -> None:
        delay = POLL_INTERVAL
        while self._lost:
            await asyncio.sleep(delay)
            for approval_id in list(self._lost):
                try:
                    async with asyncio.timeout(POLL_TIMEOUT):
                        await self._store.expire(approval_id, DATABASE_AWAY)
                except UNAVAILABLE:
                    delay = min(delay * 2, EXPIRE_RETRY_MAX)
                    break
                self._lost.discard(approval_id)
                log.info("approval %s expired: %s", approval_id, DATABASE_AWAY)


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
