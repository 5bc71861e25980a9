"""The switchboard's triage tools: rules, their dry run, thread affinity.

Changing them changes where messages go, so only the owner may (never a session, never
another butler); reading them and the dry run are open to sessions too.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any

import asyncpg
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, ValidationError

from butlers.auth.access import access_meta
from butlers.jsonutil import AnyJson, to_json
from butlers.modules.switchboard.triage_store import TooManyRules, TriageStore
from butlers.switchboard.triage import AFFINITY_CHANNELS, TriageFacts, TriageRuleSpec
from butlers.tooling import tool
from butlers.validation import describe

if TYPE_CHECKING:
    from butlers.modules.switchboard.pipeline import Pipeline

TRIAGE_WRITE_TOOLS = (
    "triage_rule_create",
    "triage_rule_update",
    "triage_rule_delete",
    "thread_affinity_configure",
    "thread_affinity_pin",
    "thread_affinity_unpin",
)
ThreadId = Annotated[str, Field(min_length=1, max_length=256)]
Short = Annotated[str, Field(max_length=1000)]
AffinityChannel = Annotated[str, Field(pattern="^(" + "|".join(AFFINITY_CHANNELS) + ")$")]


def _spec(data: dict[str, Any]) -> TriageRuleSpec:
    try:
        return TriageRuleSpec.model_validate(data)
    except ValidationError as exc:
        raise ToolError("invalid triage rule: " + describe(exc.errors(), "(rule)")) from None


def register_triage_tools(
    mcp: FastMCP, store: TriageStore, pipeline: Pipeline, meta: dict[str, object]
) -> None:
    owner = meta | access_meta(sessions=False)
    read = {"readOnlyHint": True}

    async def known_butler(spec: TriageRuleSpec) -> None:
        if spec.butler is not None and spec.butler not in await pipeline.butler_names():
            raise ToolError(
                f"no butler {spec.butler!r} is registered with the switchboard; "
                "route to one of: " + ", ".join(sorted(await pipeline.butler_names()))
            )

    @tool(mcp, meta=meta, annotations=read)
    async def triage_rules_list() -> AnyJson:
        """Triage rules in the order they are tried (priority, then name)."""
        return to_json(await store.rules())

    @tool(mcp, meta=owner)
    async def triage_rule_create(rule: dict[str, AnyJson]) -> AnyJson:
        """Add a rule: {name, match: {sender, domain, subject, list_id, mailing_list},
        action: ignore|route|classify, butler (for route), channel (email), priority
        (100; lower first), enabled}."""
        spec = _spec(rule)
        await known_butler(spec)
        try:
            return to_json(await store.create(spec))
        except TooManyRules as exc:
            raise ToolError(f"{exc}; delete one first") from None
        except asyncpg.UniqueViolationError:
            raise ToolError(
                f"a triage rule named {spec.name!r} exists; pick another name"
            ) from None

    @tool(mcp, meta=owner, annotations={"idempotentHint": True})
    async def triage_rule_update(rule_id: uuid.UUID, changes: dict[str, AnyJson]) -> AnyJson:
        """Change the given fields of a rule (the others stay as they are)."""
        current = await store.rule(rule_id)
        if current is None:
            raise ToolError(f"no triage rule {rule_id}; list them with triage_rules_list")
        merged = {k: getattr(current, k) for k in TriageRuleSpec.model_fields} | changes
        if merged.get("action") != "route" and "butler" not in changes:
            merged["butler"] = None
        spec = _spec(merged)
        await known_butler(spec)
        try:
            row = await store.replace(rule_id, spec)
        except asyncpg.UniqueViolationError:
            raise ToolError(
                f"a triage rule named {spec.name!r} exists; pick another name"
            ) from None
        if row is None:
            raise ToolError(f"no triage rule {rule_id} (deleted meanwhile)")
        return to_json(row)

    @tool(mcp, meta=owner, annotations={"idempotentHint": True})
    async def triage_rule_delete(rule_id: uuid.UUID) -> AnyJson:
        """Delete a rule."""
        return {"id": str(rule_id), "deleted": await store.delete(rule_id)}

    @tool(mcp, meta=meta, annotations=read)
    async def triage_test(
        sender: Annotated[str, Field(min_length=1, max_length=320)],
        channel: Annotated[str, Field(pattern="^(email|telegram)$")] = "email",
        subject: Short = "",
        list_id: Short = "",
        list_unsubscribe: Short = "",
        precedence: Annotated[str, Field(max_length=50)] = "",
        thread_id: ThreadId | None = None,
    ) -> AnyJson:
        """Dry run: what would happen to such a message now (nothing is stored or sent):
        {action: ignore|route|classify|affinity, butler, rule_id, rule_name, reason}."""
        facts = TriageFacts(
            channel=channel,
            sender=sender.strip().lower(),
            subject=subject,
            list_id=list_id,
            list_unsubscribe=list_unsubscribe,
            precedence=precedence,
            thread_id=thread_id,
        )
        decision = await pipeline.triage(facts)
        if decision is None:
            return {
                "action": "classify",
                "butler": None,
                "rule_id": None,
                "rule_name": None,
                "reason": "no rule matched and no thread affinity: the classifier decides",
            }
        return decision.to_json()

    @tool(mcp, meta=meta, annotations=read)
    async def thread_affinity_get() -> AnyJson:
        """Thread affinity settings and the threads the owner pinned to a butler."""
        settings = await store.settings()
        pinned = await store.pinned()
        return to_json(settings) | {"overrides": to_json(pinned)}  # type: ignore[operator]

    @tool(mcp, meta=owner, annotations={"idempotentHint": True})
    async def thread_affinity_configure(
        enabled: bool | None = None,
        ttl_days: Annotated[int | None, Field(ge=1, le=3650)] = None,
    ) -> AnyJson:
        """Turn thread affinity on or off, or change how long a learned thread is kept."""
        return to_json(await store.set_settings(enabled, ttl_days))

    @tool(mcp, meta=owner, annotations={"idempotentHint": True})
    async def thread_affinity_pin(
        thread_id: ThreadId,
        butler: Annotated[str, Field(min_length=1, max_length=200)],
        channel: AffinityChannel = "email",
    ) -> AnyJson:
        """Send every message of this thread to `butler` (until unpinned)."""
        names = await pipeline.butler_names()
        if butler not in names:
            raise ToolError(
                f"no butler {butler!r} is registered; pin to one of: {', '.join(sorted(names))}"
            )
        return to_json(await store.pin(channel, thread_id, butler))

    @tool(mcp, meta=owner, annotations={"idempotentHint": True})
    async def thread_affinity_unpin(
        thread_id: ThreadId, channel: AffinityChannel = "email"
    ) -> AnyJson:
        """Forget the thread's butler (pinned or learned): its next message is classified."""
        return {"thread_id": thread_id, "removed": await store.unpin(channel, thread_id)}
