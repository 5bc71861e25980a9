"""Seed routes for what this project does not have: calendar.

They keep the seed's paths and shapes, so clients written against the seed get a
clear answer: `501 NOT_SUPPORTED` with the reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.envelopes import ApiResponse
from butlers.dashboard.errors import NotSupported
from butlers.dashboard.support import not_supported

router = APIRouter()
NO_CALENDAR = "there is no calendar module; no calendar workspace exists"


class CalendarEntry(BaseModel):
    id: str
    title: str
    start: datetime
    end: datetime


class CalendarMeta(BaseModel):
    sources: list[str]
    lanes: list[str]
    writable: list[str]


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
