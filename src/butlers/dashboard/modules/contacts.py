"""The contacts module's tables: contacts, with their notes and interactions."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.modules.common import module_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import Where, escape_like, parse_uuid, row_json

router = APIRouter(tags=["contacts"])
MODULE = "contacts"
COLUMNS = "id, name, email, phone, birthday, details, created_at, updated_at"


class Contact(BaseModel):
    butler: str
    id: str
    name: str
    email: str | None
    phone: str | None
    birthday: date | None
    details: dict[str, JsonValue]
    created_at: datetime
    updated_at: datetime


class ContactDetail(Contact):
    notes: list[dict[str, Any]]
    interactions: list[dict[str, Any]]


@router.get("/api/contacts", response_model=PaginatedResponse[Contact])
async def contacts(
    dashboard: Ctx,
    q: Annotated[str | None, Query(max_length=200)] = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Contacts of every butler with the module, newest first; `q` matches name or email."""
    where = Where()
    if q:
        pattern = f"%{escape_like(q)}%"
        where.add("(name ILIKE {} ESCAPE '\\' OR email ILIKE {} ESCAPE '\\')", pattern, pattern)
    return await module_page(
        dashboard,
        MODULE,
        table="contacts",
        columns=COLUMNS,
        order_key="created_at",
        where=where,
        offset=offset,
        limit=limit,
    )


@router.get("/api/contacts/{butler}/{contact_id}", response_model=ApiResponse[ContactDetail])
async def contact(butler: str, contact_id: str, dashboard: Ctx) -> dict[str, Any]:
    dashboard.butler(butler)
    key = parse_uuid(contact_id, "contact id")
    row = await dashboard.db.fetchrow(butler, f"SELECT {COLUMNS} FROM contacts WHERE id = $1", key)
    if row is None:
        raise NotFound(f"no contact {contact_id} on butler {butler!r}", butler=butler)
    notes = await dashboard.db.fetch(
        butler,
        "SELECT id, body, created_at FROM contact_notes WHERE contact_id = $1 "
        "ORDER BY created_at DESC LIMIT 200",
        key,
    )
    interactions = await dashboard.db.fetch(
        butler,
        "SELECT id, kind, summary, occurred_at FROM interactions WHERE contact_id = $1 "
        "ORDER BY occurred_at DESC LIMIT 200",
        key,
    )
    detail = ContactDetail(
        butler=butler,
        **row_json(row),
        notes=[row_json(n) for n in notes],
        interactions=[row_json(i) for i in interactions],
    )
    return ok(detail)
