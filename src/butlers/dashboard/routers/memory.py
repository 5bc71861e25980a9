"""Memory across butlers: stats, one fact or rule by id, recent activity, and the
owner's writes through the butlers' tools (each audited): corrections (retract,
restore, confirm), sharing a fact with named butlers (recorded on the holding butler,
a copy kept by each named one, withdrawn from those no longer named), and a
consolidation run started now.

Every butler enabling the `memory` module is read (the others are skipped); the
paged lists of facts, rules, episodes and consolidation runs are the module's views.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound, ValidationFailed
from butlers.dashboard.sql import parse_uuid
from butlers.jsonutil import to_json
from butlers.modules.memory import store, views

router = APIRouter(tags=["memory"])
MODULE = "memory"


class ButlerMemoryStats(BaseModel):
    facts: int
    active_facts: int
    untrusted_facts: int
    rules: int
    episodes: int
    unconsolidated_episodes: int
    last_consolidation_at: datetime | None


class MemoryStats(BaseModel):
    episodes: int
    facts: int
    rules: int
    active_facts: int
    untrusted_facts: int
    unconsolidated_episodes: int
    by_butler: dict[str, ButlerMemoryStats]


class FactEntry(BaseModel):
    id: str
    butler: str
    subject: str
    predicate: str
    content: str
    importance: float
    confidence: float
    permanence: str
    provenance: Literal["owner", "butler", "untrusted"]
    source_session: str | None
    source_message: str | None
    source_channel: str | None
    validity: Literal["active", "superseded", "faded", "retracted"]
    supersedes: str | None
    superseded_by: str | None
    tags: list[str]
    shared_with: list[str]
    shared_from: str | None  # the butler that shared this copy (None: the butler's own)
    shared_id: str | None  # the fact's id on that butler
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None


class MemoryFactDetail(FactEntry):
    history: list[FactEntry]  # newer facts first, then this one, then what it superseded


class MemoryRuleDetail(BaseModel):
    id: str
    butler: str
    content: str
    helpful: int
    harmful: int
    provenance: str
    validity: str
    tags: list[str]
    shared_with: list[str]
    created_at: datetime
    updated_at: datetime


class MemoryActivity(BaseModel):
    butler: str
    kind: Literal["fact", "rule", "episode", "consolidation"]
    id: str
    text: str
    detail: str
    at: datetime


def _fact(butler: str, fact: store.Fact) -> dict[str, Any]:
    return {"butler": butler, **to_json(fact)}  # type: ignore[dict-item]


@router.get("/api/memory/stats", response_model=ApiResponse[MemoryStats])
async def memory_stats(dashboard: Ctx) -> dict[str, Any]:
    """Counts of every butler with memory, summed and by butler."""
    fan = await dashboard.db.fan_read(views.counts, dashboard.with_module(MODULE))
    by_butler = {name: ButlerMemoryStats(**asdict(counts)) for name, counts in fan.items()}
    sums = {
        key: sum(getattr(s, key) for s in by_butler.values())
        for key in (
            "episodes",
            "facts",
            "rules",
            "active_facts",
            "untrusted_facts",
            "unconsolidated_episodes",
        )
    }
    return ok(MemoryStats(**sums, by_butler=by_butler), failed_butlers=fan.failed_butlers)


async def _find(dashboard: Dashboard, read: Any, raw_id: str, what: str) -> tuple[str, Any]:
    key = parse_uuid(raw_id, f"{what} id")
    fan = await dashboard.db.fan_read(lambda pool: read(pool, key), dashboard.with_module(MODULE))
    for name, found in fan.items():
        if found is not None:
            return name, found
    where = f" (not readable: {', '.join(fan.failed_butlers)})" if fan.failed else ""
    raise NotFound(f"no {what} {raw_id} on any butler with memory{where}")


async def _fact_detail(dashboard: Dashboard, fact_id: str) -> MemoryFactDetail:
    butler, shown = await _find(dashboard, views.fact_shown, fact_id, "fact")
    return MemoryFactDetail(
        **_fact(butler, shown.fact),
        history=[FactEntry(**_fact(butler, f)) for f in shown.history],
    )


@router.get("/api/memory/facts/{fact_id}", response_model=ApiResponse[MemoryFactDetail])
async def memory_fact(fact_id: str, dashboard: Ctx) -> dict[str, Any]:
    """One fact of whichever butler holds it, with its provenance and supersession history."""
    return ok(await _fact_detail(dashboard, fact_id))


@router.get("/api/memory/rules/{rule_id}", response_model=ApiResponse[MemoryRuleDetail])
async def memory_rule(rule_id: str, dashboard: Ctx) -> dict[str, Any]:
    """One rule of whichever butler holds it."""
    butler, rule = await _find(dashboard, views.rule_shown, rule_id, "rule")
    return ok(MemoryRuleDetail(butler=butler, **to_json(rule)))  # type: ignore[arg-type]


@router.get("/api/memory/activity", response_model=ApiResponse[list[MemoryActivity]])
async def memory_activity(dashboard: Ctx) -> dict[str, Any]:
    """The latest facts, rules, episodes and consolidation runs of every butler with
    memory, interleaved newest first (at most 50)."""
    fan = await dashboard.db.fan_read(views.activity, dashboard.with_module(MODULE))
    items = [
        MemoryActivity(butler=name, **to_json(event))  # type: ignore[arg-type]
        for name, events in fan.items()
        for event in events
    ]
    items.sort(key=lambda item: item.at, reverse=True)
    return ok(items[: views.ACTIVITY_LIMIT], failed_butlers=fan.failed_butlers)


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "retract": ("memory_retract", {}),
    "restore": ("memory_restore", {}),
    "confirm": ("memory_feedback", {"outcome": "helpful"}),
}


async def _correct(
    request: Request, dashboard: Dashboard, kind: str, raw_id: str, action: str
) -> str:
    read = views.fact_shown if kind == "fact" else views.rule_shown
    butler, _found = await _find(dashboard, read, raw_id, kind)
    tool, extra = TOOLS[action]
    await dashboard.write(
        request,
        dashboard.butler(butler),
        f"memory.{kind}.{action}",
        tool,
        {"id": raw_id, **extra},
        target=raw_id,
    )
    return butler


def _fact_route(action: str, summary: str) -> None:
    async def correct_fact(fact_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
        await _correct(request, dashboard, "fact", fact_id, action)
        return ok(await _fact_detail(dashboard, fact_id))

    router.add_api_route(
        f"/api/memory/facts/{{fact_id}}/{action}",
        correct_fact,
        methods=["POST"],
        response_model=ApiResponse[MemoryFactDetail],
        name=f"{action}_fact",
        description=summary,
    )


def _rule_route(action: str, summary: str) -> None:
    async def correct_rule(rule_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
        await _correct(request, dashboard, "rule", rule_id, action)
        butler, rule = await _find(dashboard, views.rule_shown, rule_id, "rule")
        return ok(MemoryRuleDetail(butler=butler, **to_json(rule)))  # type: ignore[arg-type]

    router.add_api_route(
        f"/api/memory/rules/{{rule_id}}/{action}",
        correct_rule,
        methods=["POST"],
        response_model=ApiResponse[MemoryRuleDetail],
        name=f"{action}_rule",
        description=summary,
    )


# Through the owning butler's tool, audited.
CORRECTIONS = {
    "retract": "Stop recalling it (kept; restore undoes this).",
    "restore": "Recall a retracted one again.",
    "confirm": "Confirm it: a fact's confidence back to full, a rule's helpful count up.",
}
for _action, _summary in CORRECTIONS.items():
    _fact_route(_action, _summary)
    _rule_route(_action, _summary)


class ShareRequest(BaseModel):
    butlers: list[str] = Field(max_length=50, description="every butler to share with; [] unshares")


SHARED_FIELDS = ("subject", "predicate", "content", "permanence", "importance", "confidence")


@router.post("/api/memory/facts/{fact_id}/share", response_model=ApiResponse[MemoryFactDetail])
async def share_fact(
    fact_id: str, body: ShareRequest, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Share an active fact with exactly the named butlers (each must have memory): they
    search and recall it, marked as shared; butlers no longer named lose their copy."""
    holder, shown = await _find(dashboard, views.fact_shown, fact_id, "fact")
    fact: store.Fact = shown.fact
    if fact.shared_from is not None:
        raise ValidationFailed(
            f"fact {fact_id} is {holder}'s copy of a fact shared by {fact.shared_from}: "
            f"share {fact.shared_from}'s fact {fact.shared_id} instead"
        )
    if fact.validity != "active" and body.butlers:
        raise ValidationFailed(f"fact {fact_id} is {fact.validity}: only active facts are shared")
    named = sorted(set(body.butlers))
    with_memory = dashboard.with_module(MODULE)
    wrong = [n for n in named if n not in with_memory or n == holder]
    if wrong:
        others = ", ".join(n for n in with_memory if n != holder) or "none"
        raise ValidationFailed(
            f"cannot share with {', '.join(wrong)}: name other butlers with memory ({others})"
        )
    await dashboard.write(
        request,
        dashboard.butler(holder),
        "memory.fact.share",
        "memory_share",
        {"id": fact_id, "butlers": named},
        target=fact_id,
    )
    copy = {k: getattr(fact, k) for k in SHARED_FIELDS}
    copy |= {"provenance": fact.provenance, "tags": list(fact.tags)}
    for name in named:
        await dashboard.write(
            request,
            dashboard.butler(name),
            "memory.fact.receive_shared",
            "memory_receive_shared",
            {"origin": holder, "origin_id": fact_id, **copy},
            target=fact_id,
        )
    for name in sorted(set(fact.shared_with) - set(named)):
        if name in with_memory:
            await dashboard.write(
                request,
                dashboard.butler(name),
                "memory.fact.withdraw_shared",
                "memory_withdraw_shared",
                {"origin": holder, "origin_id": fact_id},
                target=fact_id,
            )
    return ok(await _fact_detail(dashboard, fact_id))


class ConsolidateRequest(BaseModel):
    butler: str


class ConsolidationResult(BaseModel):
    butler: str
    run: str | None = None
    status: str
    reason: str | None = None
    episodes: int = 0
    created: int = 0
    reinforced: int = 0
    superseded: int = 0
    decayed: int = 0
    faded: int = 0
    expired: int = 0


CONSOLIDATE_TIMEOUT = 300.0  # a run asks the butler's model: longer than a tool call


@router.post("/api/memory/consolidate", response_model=ApiResponse[ConsolidationResult])
async def consolidate_now(
    body: ConsolidateRequest, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Run one butler's consolidation now (episodes into facts, decay, expiry), as its
    schedule would; the run is listed among the consolidations, started by the owner."""
    if body.butler not in dashboard.with_module(MODULE):
        known = ", ".join(dashboard.with_module(MODULE)) or "none"
        raise ValidationFailed(f"{body.butler!r} has no memory (butlers with memory: {known})")
    outcome = await dashboard.write(
        request,
        dashboard.butler(body.butler),
        "memory.consolidate",
        "memory_consolidate_now",
        {},
        timeout=CONSOLIDATE_TIMEOUT,
    )
    data = outcome.data if isinstance(outcome.data, dict) else {}
    fields = {k: v for k, v in data.items() if k in ConsolidationResult.model_fields}
    return ok(ConsolidationResult(**{**fields, "butler": body.butler}))
