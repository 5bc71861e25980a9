"""Driving one declarative scenario and reading what it left behind.

`run_scenario_input` is the only place that knows how a scenario's message enters
the ecosystem: as an IngestEnvelopeV1 to the switchboard's `ingest_v1`, waiting
for classification and dispatch. Everything else reads results and rows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import step

from ..scenarios import DbAssertion, E2EScenario
from .ecosystem import EcosystemHandle

SWITCHBOARD = "switchboard"
# Tables whose content is reported elsewhere (sessions have a golden file of their own)
# or changes on its own (registry heartbeats).
SNAPSHOT_EXCLUDED = ("sessions", "llm_calls", "butler_registry")
CALL_MARGIN_SECONDS = 10.0


async def run_scenario_input(ecosystem: EcosystemHandle, scenario: E2EScenario) -> dict[str, Any]:
    """Send the scenario's message through the switchboard; returns the `ingest_v1`
    answer with its classification and one route result per target butler."""
    envelope = build_envelope(scenario.input_prompt, channel="cli", sender="e2e")
    async with asyncio.timeout(2 * scenario.timeout_seconds + CALL_MARGIN_SECONDS):
        answer = await ecosystem.call(
            SWITCHBOARD,
            "ingest_v1",
            {
                "envelope": envelope.model_dump(mode="json"),
                "wait": True,
                "route_timeout_seconds": scenario.timeout_seconds,
            },
        )
    assert isinstance(answer, dict) and "routes" in answer, f"ingest_v1 answered {answer!r}"
    return answer


def scripted_steps(scenario: E2EScenario) -> dict[str, list[dict[str, Any]]]:
    """The scenario's script; unless it scripts the switchboard itself, the
    classification routes the whole message to the expected butler."""
    steps = dict(scenario.script)
    if SWITCHBOARD not in steps:
        entry = {
            "butler": scenario.expected_butler,
            "prompt": scenario.input_prompt,
            "segment": scenario.input_prompt,
        }
        steps = {SWITCHBOARD: [step(json.dumps([entry]))], **steps}
    return steps


def route_to(answer: dict[str, Any], butler: str) -> dict[str, Any]:
    routes = [r for r in answer["routes"] if r["butler"] == butler]
    assert routes, f"nothing was routed to {butler}: {answer['routes']}"
    return routes[0]


async def classification_session(pool: asyncpg.Pool, request_id: str) -> dict[str, Any]:
    row = await pool.fetchrow(
        "SELECT * FROM sessions WHERE trigger_source = $1", f"classify:{request_id}"
    )
    assert row is not None, f"no classification session for request {request_id}"
    return dict(row)


async def db_assertion_problem(pool: asyncpg.Pool, assertion: DbAssertion) -> str | None:
    """Why the assertion fails, or None when it holds."""
    rows = [dict(row) for row in await pool.fetch(assertion.query)]
    expected = assertion.expected
    label = f"[{assertion.butler}] {assertion.description}"
    if expected is None:
        return None if not rows else f"{label}: expected no rows, got {rows}"
    if isinstance(expected, bool):
        raise TypeError(f"{label}: expected must be int, dict, list[dict] or None, not bool")
    if isinstance(expected, int):
        if len(rows) != 1 or "count" not in rows[0]:
            return f"{label}: expected one row with a `count` column, got {rows}"
        count = rows[0]["count"]
        return None if count == expected else f"{label}: count is {count}, expected {expected}"
    if isinstance(expected, dict):
        if len(rows) != 1:
            return f"{label}: expected one row, got {len(rows)}: {rows}"
        diff = {
            k: rows[0].get(k, "<missing column>")
            for k, v in expected.items()
            if rows[0].get(k, object()) != v
        }
        return None if not diff else f"{label}: columns differ: got {diff}, expected {expected}"
    if rows != list(expected):
        return f"{label}: rows differ:\n  got      {rows}\n  expected {expected}"
    return None


async def db_assertion_problems(
    ecosystem: EcosystemHandle, assertions: Sequence[DbAssertion]
) -> list[str]:
    problems = []
    for assertion in assertions:
        problem = await db_assertion_problem(await ecosystem.pool(assertion.butler), assertion)
        if problem:
            problems.append(problem)
    return problems


async def sessions_for_request(
    ecosystem: EcosystemHandle, request_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """(butler, session row) of every session any butler ran for this message's routes."""
    found = []
    for butler in ecosystem.names:
        pool = await ecosystem.pool(butler)
        rows = await pool.fetch(
            "SELECT * FROM sessions WHERE trigger_source = $1 ORDER BY created_at",
            f"switchboard:{request_id}",
        )
        found += [(butler, dict(row)) for row in rows]
    return found


async def session_row(pool: asyncpg.Pool, session_id: str) -> dict[str, Any]:
    row = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1::uuid", session_id)
    assert row is not None, f"no sessions row for {session_id}"
    return dict(row)


Snapshot = dict[str, dict[str, dict[str, Any]]]  # table → canonical JSON → row


async def snapshot_tables(pool: asyncpg.Pool) -> Snapshot:
    """Every row of every table of the butler's schema but the excluded ones."""
    tables = await pool.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'alembic%' "
        "AND NOT table_name = ANY($1::text[]) ORDER BY table_name",
        list(SNAPSHOT_EXCLUDED),
    )
    snapshot: Snapshot = {}
    for record in tables:
        table = record["table_name"]
        rows = await pool.fetch(f'SELECT * FROM "{table}"')
        snapshot[table] = {_canonical(dict(row)): dict(row) for row in rows}
    return snapshot


def changed_rows(before: Snapshot, after: Snapshot) -> dict[str, list[dict[str, Any]]]:
    """Rows added or changed between two snapshots, per table (tables without changes
    left out)."""
    changes = {}
    for table, rows in after.items():
        new = [row for key, row in rows.items() if key not in before.get(table, {})]
        if new:
            changes[table] = new
    return changes


def rows_of_request(
    changes: dict[str, list[dict[str, Any]]], request_id: str
) -> dict[str, list[dict[str, Any]]]:
    """The changed rows that belong to one request: rows naming another request (a message
    an earlier test left finishing, say) are dropped, rows naming none are kept."""
    kept = {}
    for table, rows in changes.items():
        mine = [r for r in rows if str(r.get("request_id", request_id)) == str(request_id)]
        if mine:
            kept[table] = mine
    return kept


def _canonical(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)
