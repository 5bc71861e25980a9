"""Declarative e2e scenarios: one message in, the tools it should call and the rows it
should leave. `test_scenario_runner.py` turns each into tests; adding a scenario here
needs no new test function.

With the scripted model (`script`) a scenario is exact: the tool calls and every
`db_assertions` entry must match, and the run must match its golden files. With
`--live-llm` the same message goes to a real model and only loose checks apply: the
expected tools must be among those called, and `live_db_assertions` (ILIKE, ranges,
existence) must hold.

Scenarios share one ecosystem per test session, so each one writes values no other
test writes (81.4 kg, Priya Raman, ...) and its queries select only those.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from butlers.testing.script_server import call, step

Expected = int | dict[str, Any] | list[dict[str, Any]] | None


@dataclass(frozen=True)
class DbAssertion:
    """A query on one butler's schema and what it must return.

    `expected`: int → one row whose `count` column equals it; dict → one row whose
    columns include these key/values; list[dict] → exactly these rows, in order;
    None → no rows at all.
    """

    butler: str
    query: str
    expected: Expected
    description: str


@dataclass(frozen=True)
class E2EScenario:
    id: str  # {butler}-{action}
    description: str
    input_prompt: str
    expected_butler: str
    expected_tool_calls: list[str]
    db_assertions: list[DbAssertion]
    tags: tuple[str, ...]
    timeout_seconds: float = 30
    skip_reason: str | None = None
    # Model steps of the scripted runtime, routed per butler name.
    script: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Loose checks for a real model; the exact `db_assertions` are for the script.
    live_db_assertions: list[DbAssertion] = field(default_factory=list)


def found(butler: str, query: str, description: str) -> DbAssertion:
    """A loose existence check: `query` selects the rows that would satisfy it."""
    return DbAssertion(
        butler, f"SELECT count(*) > 0 AS found FROM ({query}) AS hits", {"found": True}, description
    )


SCENARIOS: list[E2EScenario] = [
    E2EScenario(
        id="health-weight-log",
        description="A weight in kilograms is logged as one measurement",
        input_prompt="Log my weight: 81.4 kg",
        expected_butler="health",
        expected_tool_calls=["measurement_log"],
        script={
            "health": [
                step(tool_calls=[call("measurement_log", type="weight", value=81.4, unit="kg")]),
                step("Logged your weight: 81.4 kg."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "health",
                "SELECT type, value, unit FROM measurements WHERE value = '81.4'::jsonb",
                {"type": "weight", "value": 81.4, "unit": "kg"},
                "one weight row of 81.4 kg",
            ),
        ],
        live_db_assertions=[
            found(
                "health",
                "SELECT 1 FROM measurements WHERE type ILIKE '%weight%' "
                "AND value::text LIKE '%81.4%'",
                "a weight measurement of 81.4",
            ),
        ],
        tags=("health", "measurement", "smoke"),
    ),
    E2EScenario(
        id="health-blood-pressure",
        description="Blood pressure is logged as one measurement with both readings",
        input_prompt="My blood pressure this morning was 128 over 83",
        expected_butler="health",
        expected_tool_calls=["measurement_log"],
        script={
            "health": [
                step(
                    tool_calls=[
                        call(
                            "measurement_log",
                            type="blood_pressure",
                            value={"systolic": 128, "diastolic": 83},
                            unit="mmHg",
                        )
                    ]
                ),
                step("Logged 128/83 mmHg."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "health",
                "SELECT type, value, unit FROM measurements "
                'WHERE value @> \'{"systolic": 128, "diastolic": 83}\'::jsonb',
                [
                    {
                        "type": "blood_pressure",
                        "value": {"systolic": 128, "diastolic": 83},
                        "unit": "mmHg",
                    }
                ],
                "exactly one blood pressure row of 128/83",
            ),
        ],
        live_db_assertions=[
            found(
                "health",
                "SELECT 1 FROM measurements WHERE type ILIKE '%pressure%' "
                "AND value::text LIKE '%128%' AND value::text LIKE '%83%'",
                "a blood pressure measurement mentioning 128 and 83",
            ),
        ],
        tags=("health", "measurement"),
    ),
    E2EScenario(
        id="health-medication-add",
        description="A new medication is added with its dosage and frequency",
        input_prompt="I started taking Metformin, 500 mg twice a day",
        expected_butler="health",
        expected_tool_calls=["medication_add"],
        script={
            "health": [
                step(
                    tool_calls=[
                        {
                            "name": "medication_add",
                            "arguments": {
                                "name": "Metformin",
                                "dosage": "500 mg",
                                "frequency": "twice a day",
                            },
                        }
                    ]
                ),
                step("Added Metformin 500 mg, twice a day."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "health",
                "SELECT name, dosage, frequency, active FROM medications "
                "WHERE name ILIKE 'metformin'",
                [
                    {
                        "name": "Metformin",
                        "dosage": "500 mg",
                        "frequency": "twice a day",
                        "active": True,
                    }
                ],
                "Metformin is the one active medication of that name",
            ),
        ],
        live_db_assertions=[
            found(
                "health",
                "SELECT 1 FROM medications WHERE name ILIKE '%metformin%' "
                "AND coalesce(dosage, '') || coalesce(notes, '') LIKE '%500%'",
                "a Metformin medication with 500 in its dosage",
            ),
        ],
        tags=("health", "medication"),
    ),
    E2EScenario(
        id="health-symptom-log",
        description="A symptom is logged with its severity",
        input_prompt="I've had a migraine since lunch, about a 6 out of 10",
        expected_butler="health",
        expected_tool_calls=["symptom_log"],
        script={
            "health": [
                step(
                    tool_calls=[
                        {"name": "symptom_log", "arguments": {"name": "migraine", "severity": 6}}
                    ]
                ),
                step("Logged a migraine, severity 6."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "health",
                "SELECT count(*) FROM symptoms WHERE name = 'migraine' AND severity = 6",
                1,
                "one migraine of severity 6",
            ),
        ],
        live_db_assertions=[
            found(
                "health",
                "SELECT 1 FROM symptoms WHERE name ILIKE '%migraine%' AND severity BETWEEN 5 AND 7",
                "a migraine with a severity around 6",
            ),
        ],
        tags=("health", "symptom"),
    ),
    E2EScenario(
        id="relationship-add-contact",
        description="A contact is added with the email the user gave",
        input_prompt="Add Priya Raman as a contact, her email is priya.raman@example.com",
        expected_butler="relationship",
        expected_tool_calls=["contact_add"],
        script={
            "relationship": [
                step(
                    tool_calls=[
                        {
                            "name": "contact_add",
                            "arguments": {
                                "name": "Priya Raman",
                                "email": "priya.raman@example.com",
                            },
                        }
                    ]
                ),
                step("Added Priya Raman."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "relationship",
                "SELECT name, email, phone FROM contacts WHERE name = 'Priya Raman'",
                {"name": "Priya Raman", "email": "priya.raman@example.com", "phone": None},
                "Priya Raman with her email and no invented phone",
            ),
        ],
        live_db_assertions=[
            found(
                "relationship",
                "SELECT 1 FROM contacts WHERE name ILIKE '%priya%' "
                "AND email ILIKE 'priya.raman@example.com'",
                "a contact named Priya with her email",
            ),
        ],
        tags=("relationship", "contact", "smoke"),
    ),
    E2EScenario(
        id="relationship-contact-birthday",
        description="A contact is added with a birthday as a date",
        input_prompt="Tomás Ortega's birthday is on 12 April 1990, please add him",
        expected_butler="relationship",
        expected_tool_calls=["contact_add"],
        script={
            "relationship": [
                step(
                    tool_calls=[
                        {
                            "name": "contact_add",
                            "arguments": {"name": "Tomás Ortega", "birthday": "1990-04-12"},
                        }
                    ]
                ),
                step("Added Tomás Ortega, born 12 April 1990."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "relationship",
                "SELECT name, birthday FROM contacts WHERE name = 'Tomás Ortega'",
                {"name": "Tomás Ortega", "birthday": dt.date(1990, 4, 12)},
                "Tomás Ortega born 1990-04-12",
            ),
        ],
        live_db_assertions=[
            found(
                "relationship",
                "SELECT 1 FROM contacts WHERE name ILIKE '%ortega%' "
                "AND birthday = DATE '1990-04-12'",
                "Tomás Ortega with his birthday",
            ),
        ],
        tags=("relationship", "contact", "birthday"),
    ),
    E2EScenario(
        id="general-note",
        description="A note is filed in the inbox collection",
        input_prompt="Remember that the cabin wifi password is taped under the router",
        expected_butler="general",
        expected_tool_calls=["note_add"],
        script={
            "general": [
                step(
                    tool_calls=[
                        call(
                            "note_add",
                            title="Cabin wifi password",
                            body="Taped under the router.",
                            tags=["cabin"],
                        )
                    ]
                ),
                step("Noted: the cabin wifi password is taped under the router."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "general",
                "SELECT c.name AS collection, n.title, n.body, n.tags FROM notes n "
                "JOIN collections c ON c.id = n.collection_id WHERE n.title ILIKE '%cabin%'",
                [
                    {
                        "collection": "inbox",
                        "title": "Cabin wifi password",
                        "body": "Taped under the router.",
                        "tags": ["cabin"],
                    }
                ],
                "one cabin note in the inbox",
            ),
        ],
        live_db_assertions=[
            found(
                "general",
                "SELECT 1 FROM notes WHERE (title || ' ' || body) ILIKE '%router%'",
                "a note mentioning the router",
            ),
        ],
        tags=("general", "note", "smoke"),
    ),
    E2EScenario(
        id="general-shopping-list",
        description="Two items go into a shopping collection with two calls in one turn",
        input_prompt="Put oat milk and coffee beans on my shopping list",
        expected_butler="general",
        expected_tool_calls=["note_add", "note_add"],
        script={
            "general": [
                step(
                    tool_calls=[
                        call("note_add", title="Oat milk", collection="shopping"),
                        call("note_add", title="Coffee beans", collection="shopping"),
                    ]
                ),
                step("Added oat milk and coffee beans to your shopping list."),
            ]
        },
        db_assertions=[
            DbAssertion(
                "general",
                "SELECT count(*) FROM notes n JOIN collections c ON c.id = n.collection_id "
                "WHERE c.name = 'shopping'",
                2,
                "two notes in the shopping collection",
            ),
            DbAssertion(
                "general",
                "SELECT n.title FROM notes n JOIN collections c ON c.id = n.collection_id "
                "WHERE c.name = 'shopping' ORDER BY n.title",
                [{"title": "Coffee beans"}, {"title": "Oat milk"}],
                "coffee beans and oat milk, nothing else",
            ),
        ],
        live_db_assertions=[
            found(
                "general",
                "SELECT 1 FROM notes WHERE (title || ' ' || body) ILIKE '%oat milk%'",
                "a note with oat milk",
            ),
            found(
                "general",
                "SELECT 1 FROM notes WHERE (title || ' ' || body) ILIKE '%coffee%'",
                "a note with coffee beans",
            ),
        ],
        tags=("general", "note", "list"),
    ),
    E2EScenario(
        id="general-question",
        description="A plain question is answered without calling a tool or writing a row",
        input_prompt="What is a good name for a grey cat?",
        expected_butler="general",
        expected_tool_calls=[],
        script={"general": [step("Smokey, Ash or Pebble would all suit a grey cat.")]},
        db_assertions=[
            DbAssertion(
                "general",
                "SELECT title FROM notes WHERE (title || ' ' || body) ILIKE '%cat%'",
                None,
                "no note about the cat",
            ),
        ],
        live_db_assertions=[
            DbAssertion(
                "general",
                "SELECT title FROM notes WHERE (title || ' ' || body) ILIKE '%grey cat%'",
                None,
                "no note about the grey cat",
            ),
        ],
        tags=("general", "question", "no-tools"),
    ),
]
