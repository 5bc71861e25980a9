"""Approval rules, read-only: each tool's own policy, overridden by `spec.approvals.rules`.

A rule's id is `<butler>:<tool>`. Creating or revoking rules here is
`NOT_SUPPORTED`: they are part of the Butler spec, which is applied like any
other change to a Butler resource; suggestions give the YAML to add.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import yaml
from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import DashboardError, NotFound, NotSupported
from butlers.dashboard.support import not_supported

router = APIRouter()
MODULE = "approvals"
SPEC_RULES = "rules are part of the Butler spec (spec.approvals.rules)"
READ_ONLY = (
    "approval rules are part of the Butler spec (spec.approvals.rules) and each tool's own "
    "policy; change the Butler resource (roster/<name>.yaml) and re-apply it"
)


class ApprovalRule(BaseModel):
    id: str
    butler: str
    tool: str
    mode: Literal["always", "conditional", "never"]
    sensitive_args: list[str]
    source: Literal["spec", "tool"]  # a spec rule overrides the tool's own policy
    active: bool


class RuleSuggestion(BaseModel):
    action_id: str
    butler: str
    tool: str
    current: ApprovalRule | None
    suggestions: list[ApprovalRule]
    spec_snippets: list[str]


async def rules(dashboard: Dashboard) -> tuple[list[ApprovalRule], list[str]]:
    infos = [dashboard.butler(n) for n in dashboard.with_module(MODULE)]
    listed = await asyncio.gather(
        *(dashboard.clients.list_tools(info) for info in infos), return_exceptions=True
    )
    result: list[ApprovalRule] = []
    failed: list[str] = []
    for info, tools in zip(infos, listed, strict=True):
        spec_rules = (
            {r.tool: r for r in info.resource.spec.approvals.rules} if info.resource else {}
        )
        if isinstance(tools, DashboardError):
            failed.append(info.name)
            tools = []
        elif isinstance(tools, BaseException):
            raise tools
        names = {str(t.get("name")) for t in tools}
        for tool in tools:
            meta = tool.get("_meta") or {}
            mode, name = meta.get("approval_mode"), str(tool.get("name"))
            if mode and name not in spec_rules:
                result.append(_rule(info.name, name, mode, meta.get("sensitive_args"), "tool"))
        for name, rule in spec_rules.items():
            active = name in names or not names
            result.append(
                _rule(info.name, name, rule.mode, rule.sensitive_args, "spec", active=active)
            )
    result.sort(key=lambda r: r.id)
    return result, failed


def _rule(
    butler: str, tool: str, mode: str, sensitive: Any, source: str, *, active: bool = True
) -> ApprovalRule:
    return ApprovalRule(
        id=f"{butler}:{tool}",
        butler=butler,
        tool=tool,
        mode=mode,  # type: ignore[arg-type]
        sensitive_args=list(sensitive or []),
        source=source,  # type: ignore[arg-type]
        active=active,
    )


@router.get("/api/approvals/rules", response_model=ApiResponse[list[ApprovalRule]])
async def list_rules(dashboard: Ctx) -> dict[str, Any]:
    """Every tool that may need approval, with its effective policy."""
    result, failed = await rules(dashboard)
    return ok(result, failed_butlers=failed)


@router.post(
    "/api/approvals/rules",
    response_model=ApiResponse[ApprovalRule],
    openapi_extra=not_supported(SPEC_RULES),
)
async def create_rule(dashboard: Ctx) -> dict[str, Any]:
    """501: rules are part of the Butler spec."""
    raise NotSupported(READ_ONLY)


@router.post(
    "/api/approvals/rules/from-action",
    response_model=ApiResponse[ApprovalRule],
    openapi_extra=not_supported(SPEC_RULES),
)
async def create_rule_from_action(dashboard: Ctx) -> dict[str, Any]:
    """501: rules are part of the Butler spec (see the suggestions route for the YAML)."""
    raise NotSupported(READ_ONLY)


@router.get(
    "/api/approvals/rules/suggestions/{action_id}", response_model=ApiResponse[RuleSuggestion]
)
async def rule_suggestions(action_id: str, dashboard: Ctx) -> dict[str, Any]:
    """Rules one could put in the spec for this request's tool, with their YAML."""
    from butlers.dashboard.routers.approvals import find_action

    action = await find_action(dashboard, action_id)
    existing, _failed = await rules(dashboard)
    current = next((r for r in existing if r.id == f"{action.butler}:{action.tool_name}"), None)
    arguments = sorted(action.tool_args)
    options = [_rule(action.butler, action.tool_name, "always", [], "spec")]
    if arguments:
        options.append(_rule(action.butler, action.tool_name, "conditional", arguments, "spec"))
    options.append(_rule(action.butler, action.tool_name, "never", [], "spec"))
    snippets = []
    for option in options:
        rule: dict[str, Any] = {"tool": option.tool, "mode": option.mode}
        if option.sensitive_args:
            rule["sensitiveArgs"] = option.sensitive_args
        snippets.append(yaml.safe_dump({"spec": {"approvals": {"rules": [rule]}}}, sort_keys=False))
    suggestion = RuleSuggestion(
        action_id=action.id,
        butler=action.butler,
        tool=action.tool_name,
        current=current,
        suggestions=options,
        spec_snippets=snippets,
    )
    return ok(suggestion, reason=READ_ONLY)


@router.get("/api/approvals/rules/{rule_id}", response_model=ApiResponse[ApprovalRule])
async def rule_detail(rule_id: str, dashboard: Ctx) -> dict[str, Any]:
    result, failed = await rules(dashboard)
    for rule in result:
        if rule.id == rule_id:
            return ok(rule, failed_butlers=failed)
    raise NotFound(f"no approval rule {rule_id!r} (ids are <butler>:<tool>)")


@router.post(
    "/api/approvals/rules/{rule_id}/revoke",
    response_model=ApiResponse[ApprovalRule],
    openapi_extra=not_supported(SPEC_RULES),
)
async def revoke_rule(rule_id: str, dashboard: Ctx) -> dict[str, Any]:
    """501: rules are part of the Butler spec."""
    raise NotSupported(READ_ONLY)
