"""A butler's state store: read by SQL, written through `state_set` / `state_delete`.

Keys may hold any character, `/` included: the key is the rest of the path,
percent-encoded by the client (`/api/butlers/general/state/lists%2Fshopping`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.errors import NotFound, ValidationFailed
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import Where
from butlers.db.sql import escape_like
from butlers.stores.state import MAX_KEY_LENGTH

router = APIRouter(tags=["state"])


class StateEntry(BaseModel):
    key: str
    value: JsonValue
    created_at: datetime
    updated_at: datetime


class StateWrite(BaseModel):
    value: JsonValue


class StateWritten(BaseModel):
    key: str
    updated_at: str | None = None
    deleted: bool | None = None


def _check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise ValidationFailed(
            f"a state key is 1 to {MAX_KEY_LENGTH} characters without NUL; got {len(key)}"
        )


@router.get("/api/butlers/{name}/state", response_model=PaginatedResponse[StateEntry])
async def list_state(
    name: str,
    dashboard: Ctx,
    prefix: Annotated[str | None, Query(max_length=MAX_KEY_LENGTH)] = None,
    offset: Offset = 0,
    limit: Limit = 100,
) -> dict[str, Any]:
    """Entries by key (`prefix` matches literally)."""
    dashboard.butler(name)
    where = Where().when(escape_like(prefix) + "%" if prefix else None, "key LIKE {} ESCAPE '\\'")
    total = await dashboard.db.fetchrow(
        name, f"SELECT count(*) FROM state{where.sql()}", *where.args
    )
    rows = await dashboard.db.fetch(
        name,
        f"SELECT key, value, created_at, updated_at FROM state{where.sql()} "
        f"ORDER BY key OFFSET {offset} LIMIT {limit}",
        *where.args,
    )
    entries = [StateEntry(**dict(r)) for r in rows]
    return page(entries, total=int(total[0]) if total else 0, offset=offset, limit=limit)


@router.get("/api/butlers/{name}/state/{key:path}", response_model=ApiResponse[StateEntry])
async def get_state(name: str, key: str, dashboard: Ctx) -> dict[str, Any]:
    """One entry; a stored JSON null is `value: null`, a missing key is 404."""
    dashboard.butler(name)
    _check_key(key)
    row = await dashboard.db.fetchrow(
        name, "SELECT key, value, created_at, updated_at FROM state WHERE key = $1", key
    )
    if row is None:
        raise NotFound(f"no state key {key!r} on butler {name!r}", butler=name)
    return ok(StateEntry(**dict(row)))


@router.put("/api/butlers/{name}/state/{key:path}", response_model=ApiResponse[StateWritten])
async def set_state(
    name: str, key: str, body: StateWrite, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Set a value through the butler's `state_set` tool (audited)."""
    info = dashboard.butler(name)
    _check_key(key)
    outcome = await dashboard.write(
        request, info, "state.set", "state_set", {"key": key, "value": body.value}, target=key
    )
    dashboard.broker.publish("state_changed", {"butler": name, "key": key, "op": "set"})
    data = outcome.data if isinstance(outcome.data, dict) else {}
    return ok(StateWritten(key=key, updated_at=data.get("updated_at")))


@router.delete("/api/butlers/{name}/state/{key:path}", response_model=ApiResponse[StateWritten])
async def delete_state(name: str, key: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Delete a key through the butler's `state_delete` tool (audited); 404 when missing."""
    info = dashboard.butler(name)
    _check_key(key)
    outcome = await dashboard.write(
        request, info, "state.delete", "state_delete", {"key": key}, target=key
    )
    data = outcome.data if isinstance(outcome.data, dict) else {}
    if not data.get("deleted"):
        raise NotFound(f"no state key {key!r} on butler {name!r}", butler=name)
    dashboard.broker.publish("state_changed", {"butler": name, "key": key, "op": "delete"})
    return ok(StateWritten(key=key, deleted=True))
