"""One test per declarative scenario of `scenarios.py`, with the scripted model and
with a live one; ids are the scenario ids, tags work with `-k`.

Scripted: the tool calls and database rows must be exactly as declared, and the
model requests, tool calls, session row and changed rows must match the golden files
in `golden/<scenario-id>/`. Live (`--live-llm`): loose checks only, and every
scenario's tokens go to the cost tracker.
"""

from __future__ import annotations

from typing import Any

import pytest

from butlers.testing.script_server import Script

from .harness.cost import CostTracker
from .harness.ecosystem import EcosystemHandle
from .harness.golden import check_golden
from .harness.normalize import Normalizer, sort_rows
from .harness.scenario_run import (
    changed_rows,
    db_assertion_problems,
    run_scenario_input,
    session_row,
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
    request: pytest.FixtureRequest,
) -> None:
    for butler, steps in scenario.script.items():
        llm_script.route(butler, *steps)
    pool = await butler_ecosystem.pool(scenario.expected_butler)
    before = await snapshot_tables(pool)

    result = await run_scenario_input(butler_ecosystem, scenario)

    assert result["success"] is True, result["error"]
    assert [c["name"] for c in result["tool_calls"]] == scenario.expected_tool_calls
    assert not any(c["is_error"] for c in result["tool_calls"]), result["tool_calls"]
    problems = await db_assertion_problems(butler_ecosystem, scenario.db_assertions)
    assert not problems, "\n".join(problems)

    session = await session_row(pool, result["session_id"])
    changes = changed_rows(before, await snapshot_tables(pool))
    files = golden_files(scenario, llm_script.requests, session, changes, result["session_id"])
    problems = check_golden(scenario.id, files, update=request.config.getoption("--update-golden"))
    assert not problems, "\n\n".join(problems)


@pytest.mark.live_llm
@pytest.mark.parametrize("scenario", PARAMS)
async def test_live_scenario_calls_the_expected_tools_and_writes_matching_rows(
    scenario: E2EScenario,
    live_runtime: None,
    butler_ecosystem: EcosystemHandle,
    cost_tracker: CostTracker,
) -> None:
    result = await run_scenario_input(butler_ecosystem, scenario)

    session = await session_row(
        await butler_ecosystem.pool(scenario.expected_butler), result["session_id"]
    )
    entry = cost_tracker.record(scenario.id, [session])
    assert result["success"] is True, result["error"]
    called = {c["name"] for c in result["tool_calls"]}
    assert set(scenario.expected_tool_calls) <= called, f"called {sorted(called)}"
    problems = await db_assertion_problems(butler_ecosystem, scenario.live_db_assertions)
    assert not problems, "\n".join(problems)
    assert cost_tracker.scenario_problem(entry) is None, cost_tracker.scenario_problem(entry)


def golden_files(
    scenario: E2EScenario,
    requests: list[dict[str, Any]],
    session: dict[str, Any],
    changes: dict[str, list[dict[str, Any]]],
    session_id: str,
) -> dict[str, str]:
    """The numbered golden files of one run, normalized with one shared normalizer."""
    normalizer = Normalizer()
    normalizer.register(session_id, "SESSION_ID")
    model_requests = [
        {
            "butler": r.get("butler"),
            "session_id": r.get("session_id"),
            "model": r.get("model"),
            "system": r.get("system"),
            "messages": r.get("messages"),
            "tools": sorted(t["name"] for t in r.get("tools") or []),
            "env": r.get("env"),
        }
        for r in requests
    ]
    session_fields = {k: v for k, v in session.items() if k != "tool_calls"}
    rows = {
        f"{scenario.expected_butler}.{table}": sort_rows(table_rows)
        for table, table_rows in sorted(changes.items())
    }
    return {
        "01_model_requests.json": normalizer.dumps(model_requests),
        "02_tool_calls.json": normalizer.dumps(session["tool_calls"]),
        "03_session.json": normalizer.dumps(session_fields),
        "04_rows.json": normalizer.dumps(rows),
    }
