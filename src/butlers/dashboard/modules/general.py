"""The general module's tables: collections and their notes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok
from butlers.dashboard.modules.common import module_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import Where, row_json

router = APIRouter(tags=["general"])
MODULE = "general"


class Collection(BaseModel):
    butler: str
    id: str
    name: str
    description: str | None
    notes: int
    created_at: datetime


class Note(BaseModel):
    butler: str
    id: str
    collection: str
    title: str
    body: str
    data: dict[str, JsonValue]
    tags: list[str]
    created_at: datetime


@router.get("/api/general/collections", response_model=ApiResponse[list[Collection]])
async def collections(dashboard: Ctx) -> dict[str, Any]:
    fan = await dashboard.db.fan_out(
        "SELECT c.id, c.name, c.description, c.created_at, "
        "(SELECT count(*) FROM notes n WHERE n.collection_id = c.id) AS notes "
        "FROM collections c ORDER BY c.name",
        butler_names=dashboard.with_module(MODULE),
    )
    return ok(
        [Collection(butler=n, **row_json(r)) for n, r in fan.rows()],
        failed_butlers=fan.failed_butlers,
    )


@router.get("/api/general/notes", response_model=PaginatedResponse[Note])
async def notes(
    dashboard: Ctx, collection: str | None = None, offset: Offset = 0, limit: Limit = 50
) -> dict[str, Any]:
    where = Where().when(collection, "c.name = {}")
    return await module_page(
        dashboard,
        MODULE,
        table="notes n JOIN collections c ON c.id = n.collection_id",
        columns="n.id, c.name AS collection, n.title, n.body, n.data, n.tags, n.created_at",
        order_key="created_at",
        order_sql="n.created_at DESC, n.id DESC",
        where=where,
        offset=offset,
        limit=limit,
    )
