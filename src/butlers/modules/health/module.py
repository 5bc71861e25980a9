"""The `health` module's MCP-facing class: its config, tools and lifecycle."""

import uuid
from datetime import datetime
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, FiniteFloat

from butlers.jsonutil import AnyJson, Note, ShortText, to_json
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta
from butlers.modules.health.store import HealthStore
from butlers.tooling import tool

NAME = "health"
Limit = Annotated[int, Field(ge=1, le=1000)]
MeasurementType = Annotated[
    str, Field(min_length=1, max_length=100, description="e.g. weight, blood_pressure")
]
Value = Annotated[
    FiniteFloat | dict[str, AnyJson],  # "NaN" as text is refused here, not by the database
    Field(description='A number, or an object such as {"systolic": 120, "diastolic": 80}.'),
]


def _type(value: str) -> str:
    return value.strip().lower().replace(" ", "_")


class HealthModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = HealthStore(ctx.pool)
        ctx.services.briefings[NAME] = store.briefing
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}

        @tool(mcp, meta=meta)
        async def measurement_log(
            type: MeasurementType,
            value: Value,
            unit: ShortText | None = None,
            measured_at: datetime | None = None,
            notes: Note | None = None,
        ) -> AnyJson:
            """Record a measurement (weight, blood pressure, heart rate, ...) with its unit."""
            row = await store.log_measurement(_type(type), value, unit, measured_at, notes)
            return to_json(row)

        @tool(mcp, meta=meta, annotations=read)
        async def measurement_list(type: ShortText | None = None, limit: Limit = 50) -> AnyJson:
            """Recent measurements, newest first, optionally of one type."""
            rows = await store.measurements(_type(type) if type else None, None, None, limit)
            return to_json(rows)

        @tool(mcp, meta=meta, annotations=read)
        async def measurement_latest(type: MeasurementType) -> AnyJson:
            """The most recent measurement of a type; null when there is none."""
            rows = await store.measurements(_type(type), None, None, 1)
            return to_json(rows[0]) if rows else None

        @tool(mcp, meta=meta, annotations=read)
        async def measurement_range(
            type: MeasurementType, start: datetime, end: datetime, limit: Limit = 1000
        ) -> AnyJson:
            """Measurements of a type with start <= measured_at < end, newest first."""
            if end <= start:
                raise ToolError("end must be after start")
            return to_json(await store.measurements(_type(type), start, end, limit))

        @tool(mcp, meta=meta)
        async def medication_add(
            name: Annotated[str, Field(min_length=1, max_length=200)],
            dosage: ShortText | None = None,
            frequency: ShortText | None = None,
            notes: Note | None = None,
        ) -> AnyJson:
            """Add a medication (or update the one with this name)."""
            return to_json(await store.add_medication(name.strip(), dosage, frequency, notes))

        @tool(mcp, meta=meta, annotations=read)
        async def medication_list(active_only: bool = True) -> AnyJson:
            """Medications with their last dose time."""
            return to_json(await store.medications(active_only))

        @tool(mcp, meta=meta)
        async def medication_log_dose(
            medication_id: uuid.UUID, taken_at: datetime | None = None, notes: Note | None = None
        ) -> AnyJson:
            """Record that a dose of a medication was taken."""
            row = await store.log_dose(medication_id, taken_at, notes)
            if row is None:
                raise ToolError(f"no medication {medication_id}; see medication_list")
            return to_json(row)

        @tool(mcp, meta=meta)
        async def symptom_log(
            name: Annotated[str, Field(min_length=1, max_length=200)],
            severity: Annotated[int | None, Field(ge=1, le=10)] = None,
            occurred_at: datetime | None = None,
            notes: Note | None = None,
        ) -> AnyJson:
            """Record a symptom with an optional severity from 1 (mild) to 10 (severe)."""
            row = await store.log_symptom(_type(name), severity, occurred_at, notes)
            return to_json(row)

        @tool(mcp, meta=meta, annotations=read)
        async def symptom_list(
            name: ShortText | None = None, since: datetime | None = None, limit: Limit = 50
        ) -> AnyJson:
            """Recorded symptoms, newest first."""
            rows = await store.symptoms(_type(name) if name else None, since, limit)
            return to_json(rows)
