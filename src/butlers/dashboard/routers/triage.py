"""E-mail triage rules and thread affinity of the switchboard: read by SQL, changed
through its owner-only `triage_*` / `thread_affinity_*` tools (audited), and a dry run
(`triage_test`) that stores and sends nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.sql import row_json
from butlers.jsonutil import to_json
from butlers.modules.switchboard import store
from butlers.spec import SWITCHBOARD_MODULE
from butlers.switchboard.triage import Action, RuleChannel, TriageMatch

router = APIRouter(tags=["switchboard"])
RULES = "/api/switchboard/triage-rules"
AFFINITY = "/api/switchboard/thread-affinity"
Name = Annotated[str, Field(min_length=1, max_length=200)]


class TriageRule(BaseModel):
    id: str
    name: str
    priority: int
    enabled: bool
    channel: RuleChannel
    match: TriageMatch
    action: Action
    butler: str | None
    created_at: datetime
    updated_at: datetime


class TriageRuleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name
    match: TriageMatch
    action: Action
    butler: Name | None = None
    channel: RuleChannel = "email"
    priority: Annotated[int, Field(ge=0, le=100_000)] = 100
    enabled: bool = True


class TriageRuleUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    match: TriageMatch | None = None
    action: Action | None = None
    butler: Name | None = None
    channel: RuleChannel | None = None
    priority: Annotated[int | None, Field(ge=0, le=100_000)] = None
    enabled: bool | None = None


class TriageRuleDeleted(BaseModel):
    id: str
    deleted: bool


class TriageTest(BaseModel):
    """A message to try the rules and thread affinity on (nothing is stored)."""

    model_config = ConfigDict(extra="forbid")
    sender: Annotated[str, Field(min_length=1, max_length=320)]
    channel: Literal["email", "telegram"] = "email"
    subject: Annotated[str, Field(max_length=1000)] = ""
    list_id: Annotated[str, Field(max_length=1000)] = ""
    list_unsubscribe: Annotated[str, Field(max_length=1000)] = ""
    precedence: Annotated[str, Field(max_length=50)] = ""
    thread_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None


class TriageTestResult(BaseModel):
    action: Literal["ignore", "route", "classify", "affinity"]
    butler: str | None
    rule_id: str | None
    rule_name: str | None
    reason: str


class ThreadOverride(BaseModel):
    channel: str
    thread_id: str
    butler: str
    pinned: bool
    request_id: str | None
    updated_at: datetime


class ThreadAffinitySettings(BaseModel):
    enabled: bool
    ttl_days: int
    updated_at: datetime
    overrides: list[ThreadOverride]


class ThreadAffinityUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = None
    ttl_days: Annotated[int | None, Field(ge=1, le=3650)] = None


class ThreadPin(BaseModel):
    model_config = ConfigDict(extra="forbid")
    butler: Name
    channel: Literal["email"] = "email"


class ThreadUnpinned(BaseModel):
    thread_id: str
    removed: bool


def _switchboard(dashboard: Dashboard) -> str:
    names = dashboard.with_module(SWITCHBOARD_MODULE)
    if not names:
        raise NotFound("no butler runs the switchboard module")
    return names[0]


def _rule(data: dict[str, Any]) -> TriageRule:
    return TriageRule(**row_json(data))


async def _write(
    request: Request, dashboard: Dashboard, operation: str, tool: str, arguments: dict[str, Any]
) -> Any:
    info = dashboard.butler(_switchboard(dashboard))
    outcome = await dashboard.write(request, info, operation, tool, arguments)
    return outcome.data


@router.get(RULES, response_model=ApiResponse[list[TriageRule]])
async def list_triage_rules(dashboard: Ctx) -> dict[str, Any]:
    """Triage rules in the order they are tried (priority, then name)."""
    rows = await dashboard.db.read(_switchboard(dashboard), store.triage_rules)
    return ok([TriageRule.model_validate(to_json(r)) for r in rows])


@router.post(RULES, response_model=ApiResponse[TriageRule], status_code=201)
async def create_triage_rule(
    body: TriageRuleCreate, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """A bad rule or an unknown butler is TOOL_ERROR with the reason."""
    rule = body.model_dump(mode="json", exclude_none=True)
    data = await _write(request, dashboard, "triage.create", "triage_rule_create", {"rule": rule})
    return ok(_rule(data))


@router.patch(RULES + "/{rule_id}", response_model=ApiResponse[TriageRule])
async def update_triage_rule(
    rule_id: str, body: TriageRuleUpdate, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    changes = body.model_dump(mode="json", exclude_unset=True)
    arguments = {"rule_id": rule_id, "changes": changes}
    data = await _write(request, dashboard, "triage.update", "triage_rule_update", arguments)
    return ok(_rule(data))


@router.delete(RULES + "/{rule_id}", response_model=ApiResponse[TriageRuleDeleted])
async def delete_triage_rule(rule_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    arguments = {"rule_id": rule_id}
    data = await _write(request, dashboard, "triage.delete", "triage_rule_delete", arguments)
    return ok(TriageRuleDeleted(**data))


@router.post(RULES + "/test", response_model=ApiResponse[TriageTestResult])
async def test_triage_rules(body: TriageTest, dashboard: Ctx) -> dict[str, Any]:
    """Dry run: what the switchboard would do with such a message now."""
    name = _switchboard(dashboard)
    outcome = await dashboard.clients.call(
        dashboard.butler(name), "triage_test", body.model_dump(exclude_none=True)
    )
    return ok(TriageTestResult(**outcome.data))


async def _affinity(dashboard: Dashboard) -> ThreadAffinitySettings:
    name = _switchboard(dashboard)
    settings = await dashboard.db.read(name, store.affinity_settings)
    pinned = await dashboard.db.read(name, store.pinned_threads)
    return ThreadAffinitySettings(
        enabled=settings.affinity_enabled,
        ttl_days=settings.affinity_ttl_days,
        updated_at=settings.updated_at,
        overrides=[ThreadOverride.model_validate(to_json(p)) for p in pinned],
    )


@router.get(AFFINITY, response_model=ApiResponse[ThreadAffinitySettings])
async def thread_affinity(dashboard: Ctx) -> dict[str, Any]:
    """Thread affinity settings and the threads pinned to a butler."""
    return ok(await _affinity(dashboard))


@router.patch(AFFINITY, response_model=ApiResponse[ThreadAffinitySettings])
async def configure_thread_affinity(
    body: ThreadAffinityUpdate, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    arguments = body.model_dump(exclude_none=True)
    await _write(request, dashboard, "affinity.configure", "thread_affinity_configure", arguments)
    return ok(await _affinity(dashboard))


@router.put(AFFINITY + "/overrides/{thread_id:path}", response_model=ApiResponse[ThreadOverride])
async def pin_thread(
    thread_id: str, body: ThreadPin, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Send every message of the thread to `butler` (an unknown butler is TOOL_ERROR)."""
    arguments = {"thread_id": thread_id, **body.model_dump()}
    data = await _write(request, dashboard, "affinity.pin", "thread_affinity_pin", arguments)
    return ok(ThreadOverride(**data))


@router.delete(AFFINITY + "/overrides/{thread_id:path}", response_model=ApiResponse[ThreadUnpinned])
async def unpin_thread(thread_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    arguments = {"thread_id": thread_id}
    data = await _write(request, dashboard, "affinity.unpin", "thread_affinity_unpin", arguments)
    return ok(ThreadUnpinned(**data))
