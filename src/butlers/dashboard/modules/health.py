"""The health module's tables: measurements, medications, symptoms."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import PaginatedResponse
from butlers.dashboard.modules.common import module_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import Where

router = APIRouter(tags=["health"])
MODULE = "health"


class Measurement(BaseModel):
    butler: str
    id: str
    type: str
    value: JsonValue
    unit: str | None
    measured_at: datetime
    notes: str | None


class Medication(BaseModel):
    butler: str
    id: str
    name: str
    dosage: str | None
    frequency: str | None
    notes: str | None
    active: bool
    created_at: datetime


class Symptom(BaseModel):
    butler: str
    id: str
    name: str
    severity: int | None
    occurred_at: datetime
    notes: str | None


@router.get("/api/health/measurements", response_model=PaginatedResponse[Measurement])
async def measurements(
    dashboard: Ctx, type: str | None = None, offset: Offset = 0, limit: Limit = 50
) -> dict[str, Any]:
    return await module_page(
        dashboard,
        MODULE,
        table="measurements",
        columns="id, type, value, unit, measured_at, notes",
        order_key="measured_at",
        where=Where().when(type, "type = {}"),
        offset=offset,
        limit=limit,
    )


@router.get("/api/health/medications", response_model=PaginatedResponse[Medication])
async def medications(dashboard: Ctx, offset: Offset = 0, limit: Limit = 50) -> dict[str, Any]:
    return await module_page(
        dashboard,
        MODULE,
        table="medications",
        columns="id, name, dosage, frequency, notes, active, created_at",
        order_key="created_at",
        offset=offset,
        limit=limit,
    )


@router.get("/api/health/symptoms", response_model=PaginatedResponse[Symptom])
async def symptoms(dashboard: Ctx, offset: Offset = 0, limit: Limit = 50) -> dict[str, Any]:
    return await module_page(
        dashboard,
        MODULE,
        table="symptoms",
        columns="id, name, severity, occurred_at, notes",
        order_key="occurred_at",
        offset=offset,
        limit=limit,
    )
