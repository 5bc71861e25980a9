"""Seed routes for what this project does not have: memory and calendar.

They keep the seed's paths and shapes, so clients written against the seed get a
clear answer: `501 NOT_SUPPORTED` with the reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse
from butlers.dashboard.errors import NotSupported
from butlers.dashboard.support import not_supported

router = APIRouter()
NO_MEMORY = "butlers have no memory tiers (episodes, facts, rules); see their state stores"
NO_CALENDAR = "there is no calendar module; no calendar workspace exists"


class MemoryStats(BaseModel):
    episodes: int
    facts: int
    rules: int


class MemoryItem(BaseModel):
    id: str
    butler: str
    content: str
    created_at: datetime


class CalendarEntry(BaseModel):
    id: str
    title: str
    start: datetime
    end: datetime


class CalendarMeta(BaseModel):
    sources: list[str]
    lanes: list[str]
    writable: list[str]


def _memory(path: str, model: Any) -> None:
    @router.get(
        path,
        response_model=model,
        tags=["memory"],
        name=f"memory {path}",
        openapi_extra=not_supported("butlers have no memory tiers"),
    )
    async def handler() -> dict[str, Any]:
        raise NotSupported(NO_MEMORY)


_memory("/api/memory/stats", ApiResponse[MemoryStats])
_memory("/api/memory/episodes", PaginatedResponse[MemoryItem])
_memory("/api/memory/facts", PaginatedResponse[MemoryItem])
_memory("/api/memory/facts/{fact_id}", ApiResponse[MemoryItem])
_memory("/api/memory/rules", PaginatedResponse[MemoryItem])
_memory("/api/memory/rules/{rule_id}", ApiResponse[MemoryItem])
_memory("/api/memory/activity", ApiResponse[list[MemoryItem]])


@router.get(
    "/api/calendar/workspace",
    response_model=ApiResponse[list[CalendarEntry]],
    tags=["calendar"],
    openapi_extra=not_supported("no calendar module"),
)
async def calendar_workspace() -> dict[str, Any]:
    raise NotSupported(NO_CALENDAR)


@router.get(
    "/api/calendar/workspace/meta",
    response_model=ApiResponse[CalendarMeta],
    tags=["calendar"],
    openapi_extra=not_supported("no calendar module"),
)
async def calendar_meta() -> dict[str, Any]:
    raise NotSupported(NO_CALENDAR)


for _path in ("sync", "user-events", "butler-events"):

    @router.post(
        f"/api/calendar/workspace/{_path}",
        response_model=ApiResponse[CalendarMeta],
        tags=["calendar"],
        name=f"calendar {_path}",
        openapi_extra=not_supported("no calendar module"),
    )
    async def calendar_write() -> dict[str, Any]:
        raise NotSupported(NO_CALENDAR)
