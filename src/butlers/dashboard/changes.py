"""What each kind of change hint means: the table, how to re-read it, which event it is.

Butlers publish `pg_notify('butlers_changes', {"schema", "table", "op", "id"})`
from triggers on these tables (ids only: the dashboard re-reads the rows with its
own read-only role, so nothing private travels in a notification).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from butlers.jsonutil import json_object
from butlers.modules.view import Changes
from butlers.modules.views import all_module_views

CHANNEL = "butlers_changes"

Emit = tuple[str, dict[str, Any], tuple[Any, ...]]  # event type, data, dedup key


def with_start(emit: Emit, start_kind: str, start_status: str) -> list[Emit]:
    """`emit`, preceded by the row's start event when the row is already past its start.

    A hint carries only the id: by the time the row is re-read it may have moved on
    (a message classified a millisecond after it was accepted). The start event is
    derived from the row then (its status set to the start status); the feed's dedup
    key drops it when the start was already seen.
    """
    kind, data, key = emit
    if kind == start_kind:
        return [emit]
    start = (start_kind, {**data, "status": start_status}, (*key[:2], start_status))
    return [start, emit]


@dataclass(frozen=True)
class ChangeSource:
    table: str
    id_column: str
    module: str | None  # only butlers enabling this module have the table
    columns: str
    poll_where: str  # rows changed since $1 (a timestamp); "" = the whole (small) table
    to_event: Callable[[str, asyncpg.Record], list[Emit]]

    def select_by_ids(self) -> str:
        return f"SELECT {self.columns} FROM {self.table} WHERE {self.id_column} = ANY($1::uuid[])"

    def select_since(self) -> str:
        where = f" WHERE {self.poll_where}" if self.poll_where else ""
        return f"SELECT {self.columns} FROM {self.table}{where}"


def _session(butler: str, row: asyncpg.Record) -> list[Emit]:
    data: dict[str, Any] = json_object(dict(row))
    data["butler"] = butler
    kind = "session_start" if row["status"] == "running" else "session_end"
    emit = (kind, data, ("sessions", str(row["session_id"]), row["status"]))
    return with_start(emit, "session_start", "running")


def _module_event(changes: Changes) -> Callable[[str, asyncpg.Record], list[Emit]]:
    """A module's change source (its views' `Changes`) as a row → events function."""

    def to_event(butler: str, row: asyncpg.Record) -> list[Emit]:
        data: dict[str, Any] = json_object(dict(row))
        data["butler"] = butler
        status = row["status"]
        kind = changes.events.get(status, changes.default)
        # Past its start, a change of an `also` column is news too (the start event's
        # key stays the one `with_start` derives, so it is published once).
        also = () if status == changes.start[1] else tuple(row[c] for c in changes.also)
        emit = (kind, data, (changes.table, str(row[changes.id_column]), status, *also))
        return with_start(emit, *changes.start)

    return to_event


def _schedule(butler: str, row: asyncpg.Record) -> list[Emit]:
    data: dict[str, Any] = json_object(dict(row))
    data["butler"] = butler
    data["deleted"] = False
    return [("schedule_changed", data, ("scheduled_tasks", str(row["id"]), row["updated_at"]))]


def schedule_deleted(butler: str, schedule_id: str) -> Emit:
    data = {"butler": butler, "id": schedule_id, "deleted": True}
    return "schedule_changed", data, ("scheduled_tasks", schedule_id, "deleted")


CORE_SOURCES = (
    ChangeSource(
        "sessions",
        "session_id",
        None,
        "session_id, trigger_source, status, model, created_at AS started_at, "
        "completed_at, duration_ms, cost_usd, trace_id, error",
        # Sessions end within the spawner's timeout (at most an hour).
        "created_at >= $1::timestamptz - interval '2 hours' "
        "AND (created_at >= $1 OR completed_at >= $1)",
        _session,
    ),
    ChangeSource(
        "scheduled_tasks",
        "id",
        None,
        "id, name, enabled, status, next_due_at, last_run_at, last_error, updated_at",
        "",
        _schedule,
    ),
)


@functools.cache
def sources() -> dict[str, ChangeSource]:
    """Every followed table: the core's, then each module's (from its views)."""
    modules = [
        ChangeSource(c.table, c.id_column, views.module, c.columns, c.poll_where, _module_event(c))
        for views in all_module_views()
        for c in views.changes
    ]
    return {source.table: source for source in (*CORE_SOURCES, *modules)}
