"""Seed routes for what this project does not have: calendar and Google OAuth.

They keep the seed's paths and shapes, so clients written against the seed get a
clear answer: `501 NOT_SUPPORTED` with the reason, or (for OAuth's status and
credential probes, which the seed polls) the true state, "not configured".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotSupported
from butlers.dashboard.support import empty_data, not_supported

router = APIRouter()
NO_CALENDAR = "there is no calendar module; no calendar workspace exists"
NO_OAUTH = (
    "Butlers has no Google OAuth integration; channels take their credentials from "
    "environment variables or Kubernetes Secrets named in the Butler spec"
)


class CalendarEntry(BaseModel):
    id: str
    title: str
    start: datetime
    end: datetime


class CalendarMeta(BaseModel):
    sources: list[str]
    lanes: list[str]
    writable: list[str]


class OAuthStatus(BaseModel):
    state: Literal["not_configured"]
    connected: bool
    remediation: str


class OAuthCredentials(BaseModel):
    client_id_set: bool
    client_secret_set: bool
    refresh_token_set: bool


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


@router.get(
    "/api/oauth/status",
    response_model=ApiResponse[OAuthStatus],
    tags=["oauth"],
    openapi_extra=empty_data("not_configured: no OAuth integration"),
)
async def oauth_status() -> dict[str, Any]:
    """Always 200 (safe to poll): there is nothing to connect."""
    status = OAuthStatus(state="not_configured", connected=False, remediation=NO_OAUTH)
    return ok(status, supported=False, reason=NO_OAUTH)


@router.get(
    "/api/oauth/google/credentials",
    response_model=ApiResponse[OAuthCredentials],
    tags=["oauth"],
    openapi_extra=empty_data("nothing is set: no OAuth integration"),
)
async def oauth_credentials() -> dict[str, Any]:
    none = OAuthCredentials(client_id_set=False, client_secret_set=False, refresh_token_set=False)
    return ok(none, supported=False, reason=NO_OAUTH)


@router.get(
    "/api/oauth/google/start",
    response_model=ApiResponse[dict[str, str]],
    tags=["oauth"],
    openapi_extra=not_supported("no OAuth integration"),
)
async def oauth_start() -> dict[str, Any]:
    raise NotSupported(NO_OAUTH)


@router.get(
    "/api/oauth/google/callback",
    response_model=ApiResponse[dict[str, str]],
    tags=["oauth"],
    openapi_extra=not_supported("no OAuth integration"),
)
async def oauth_callback() -> dict[str, Any]:
    raise NotSupported(NO_OAUTH)


@router.put(
    "/api/oauth/google/credentials",
    response_model=ApiResponse[OAuthCredentials],
    tags=["oauth"],
    openapi_extra=not_supported("no OAuth integration"),
)
async def oauth_store_credentials() -> dict[str, Any]:
    raise NotSupported(NO_OAUTH)


@router.delete(
    "/api/oauth/google/credentials",
    response_model=ApiResponse[OAuthCredentials],
    tags=["oauth"],
    openapi_extra=not_supported("no OAuth integration"),
)
async def oauth_delete_credentials() -> dict[str, Any]:
    raise NotSupported(NO_OAUTH)
