"""One test per declarative scenario of `scenarios.py`, with the scripted model and
with a live one; ids are the scenario ids, tags work with `-k`.

Each message goes in through the switchboard (`ingest_v1`, waiting for dispatch).
Scripted: the classification routes to the expected butler only, its tool calls and
database rows must be exactly as declared, and the model requests, tool calls,
sessions, changed rows, switchboard rows (message_inbox, routing_log,
fanout_execution_log) and the `ingest_v1` answer must match the golden files in
`golden/<scenario-id>/`. Live
(`--live-llm`): loose checks only, and every scenario's tokens go to the cost tracker.
"""

from __future__ import annotations

from typing import Any

import pytest

from butlers.testing.script_server import Script, offered_tools

from .harness.cost import CostTracker
from .harness.ecosystem import EcosystemHandle
from .harness.golden import check_golden
from .harness.normalize import VOLATILE_KEYS, Normalizer, sort_rows
from .harness.scenario_run import (
    SWITCHBOARD,
    changed_rows,
    classification_session,
    db_assertion_problems,
    route_to,
    rows_of_request,
    run_scenario_input,
    scripted_steps,
    session_row,
    sessions_for_request,
    snapshot_tables,
)
from .scenarios import SCENARIOS, E2EScenario

PARAMS = [
    pytest.param(
        s,
        id=s.id,
        marks=[pytest.mark.skip(reason=s.skip_reason)] if s.skip_reason else [],
    )
    for s in SCENARIOS
]


def test_scenario_ids_are_unique_and_name_their_butler() -> None:
    ids = [s.id for s in SCENARIOS]
    assert len(ids) == len(set(ids))
    for scenario in SCENARIOS:
        assert scenario.id.startswith(f"{scenario.expected_butler}-"), scenario.id
        assert scenario.db_assertions and scenario.live_db_assertions, scenario.id


@pytest.mark.parametrize("scenario", PARAMS)
async def test_scripted_scenario_matches_its_declaration_and_golden_files(
    scenario: E2EScenario,
    llm_script: Script,
    butler_ecosystem: EcosystemHandle,
    update_golden: bool,
) -> None:
    for butler, steps in scripted_steps(scenario).items():
        llm_script.route(butler, *steps)
    pool = await butler_ecosystem.pool(scenario.expected_butler)
    switchboard = await butler_ecosystem.pool(SWITCHBOARD)
    before = await snapshot_tables(pool), await snapshot_tables(switchboard)

    answer = await run_scenario_input(butler_ecosystem, scenario)

    assert answer["classification"]["fallback"] is False, answer["classification"]
    # The classifier chose among the registered butlers, the expected one included...
    classification = await classification_session(switchboard, answer["request_id"])
    assert f"\n{scenario.expected_butler}: " in classification["prompt"]
    # ...and the message ran exactly one session, on the expected butler, as routed.
    ran = await sessions_for_request(butler_ecosystem, answer["request_id"])
    assert [(b, s["status"]) for b, s in ran] == [(scenario.expected_butler, "completed")], ran
    route = route_to(answer, scenario.expected_butler)
    assert route["status"] == "success", route["error"]
    assert route["session_id"] == str(ran[0][1]["session_id"])
    session = await session_row(pool, route["session_id"])
    assert [c["name"] for c in session["tool_calls"]] == scenario.expected_tool_calls
    assert not any(c["is_error"] for c in session["tool_calls"]), session["tool_calls"]
    problems = await db_assertion_problems(butler_ecosystem, scenario.db_assertions)
    assert not problems, "\n".join(problems)

    asked = [r.get("butler") for r in llm_script.requests]
    assert asked[0] == SWITCHBOARD and SWITCHBOARD not in asked[1:], (
        f"the model was asked by {asked}: classification must come first, once"
    )
    changes = changed_rows(before[0], await snapshot_tables(pool))
    routing = rows_of_request(
        changed_rows(before[1], await snapshot_tables(switchboard)), answer["request_id"]
    )
    files = golden_files(
        scenario, answer, llm_script.requests, [classification, session], changes, routing
    )
    problems = check_golden(scenario.id, files, update=update_golden)
    assert not problems, "\n\n".join(problems)


@pytest.mark.live_llm
@pytest.mark.parametrize("scenario", PARAMS)
async def test_live_scenario_routes_to_the_butler_that_calls_the_expected_tools(
    scenario: E2EScenario,
    live_runtime: None,
    butler_ecosystem: EcosystemHandle,
    cost_tracker: CostTracker,
) -> None:
    answer = await run_scenario_input(butler_ecosystem, scenario)

    sessions = [
        await classification_session(await butler_ecosystem.pool(SWITCHBOARD), answer["request_id"])
    ]
    for route in answer["routes"]:
        if route["session_id"]:
            pool = await butler_ecosystem.pool(route["butler"])
            sessions.append(await session_row(pool, route["session_id"]))
    entry = cost_tracker.record(scenario.id, sessions)
    assert cost_tracker.scenario_problem(entry) is None, cost_tracker.scenario_problem(entry)
    assert scenario.expected_butler in {r["butler"] for r in answer["routes"]}, answer["routes"]
    route = route_to(answer, scenario.expected_butler)
    assert route["status"] == "success", route["error"]
    called = set(route["tool_calls"])
    assert set(scenario.expected_tool_calls) <= called, f"called {sorted(called)}"
    problems = await db_assertion_problems(butler_ecosystem, scenario.live_db_assertions)
    assert not problems, "\n".join(problems)


def golden_files(
    scenario: E2EScenario,
    answer: dict[str, Any],
    requests: list[dict[str, Any]],
    sessions: list[dict[str, Any]],
    changes: dict[str, list[dict[str, Any]]],
    routing: dict[str, list[dict[str, Any]]],
) -> dict[str, str]:
    """The numbered golden files of one run, normalized with one shared normalizer.

    The target session comes last in `sessions`; its id becomes {SESSION_ID_1}, the
    message's {REQUEST_ID_1} and the routes' {ROUTE_ID_n}. The idempotency key is
    derived from the envelope's random event id, so it is masked.
    """
    normalizer = Normalizer(
        volatile_keys={
            **VOLATILE_KEYS,
            "idempotency_key": "{IDEMPOTENCY_KEY}",
            # A keyed session's hash covers its context, which holds the route's id.
            "request_hash": "{REQUEST_HASH}",
        }
    )
    normalizer.register(sessions[-1]["session_id"], "SESSION_ID")
    normalizer.register(answer["request_id"], "REQUEST_ID")
    for route in answer["routes"]:
        normalizer.register(route["route_id"], "ROUTE_ID")
    model_requests = [
        {
            "butler": r.get("butler"),
            "session_id": r.get("session_id"),
            "model": r.get("model"),
            "system": r.get("system"),
            "messages": r.get("messages"),
            "tools": sorted(offered_tools(r)[0]),
            "tools_on_request": sorted(offered_tools(r)[1]),
            "env": r.get("env"),
        }
        for r in model_request_order(requests)
    ]
    return {
        "01_model_requests.json": normalizer.dumps(model_requests),
        "02_tool_calls.json": normalizer.dumps(sessions[-1]["tool_calls"]),
        "03_sessions.json": normalizer.dumps(
            [{k: v for k, v in s.items() if k != "tool_calls"} for s in sessions]
        ),
        "04_rows.json": normalizer.dumps(_rows(scenario.expected_butler, changes)),
        "05_routing.json": normalizer.dumps(_rows(SWITCHBOARD, routing)),
        "06_ingest_answer.json": normalizer.dumps(answer),
    }


def _rows(butler: str, changes: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {f"{butler}.{table}": sort_rows(rows) for table, rows in sorted(changes.items())}


def model_request_order(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests grouped per butler (switchboard first, then by name), each butler's in
    the order it asked: routes to several butlers run concurrently, so only the order
    within a butler is deterministic; the interleaving is checked, not golden."""
    return sorted(requests, key=lambda r: (r.get("butler") != SWITCHBOARD, r.get("butler") or ""))
