"""Queries over the health tables, returning typed records (their fields are the columns)."""

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.modules.briefing import MAX_LINES, day_bounds
from butlers.modules.view import Clause, Listing
from butlers.stores.records import Record


@dataclass(frozen=True, slots=True)
class Measurement(Record):
    id: uuid.UUID
    type: str
    value: JsonValue
    unit: str | None
    measured_at: datetime
    notes: str | None


@dataclass(frozen=True, slots=True)
class Medication(Record):
    id: uuid.UUID
    name: str
    dosage: str | None
    frequency: str | None
    notes: str | None
    active: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MedicationListed(Record):
    """A medication with the time of its last dose (`medication_list`)."""

    id: uuid.UUID
    name: str
    dosage: str | None
    frequency: str | None
    notes: str | None
    active: bool
    created_at: datetime
    last_taken_at: datetime | None


@dataclass(frozen=True, slots=True)
class Dose(Record):
    id: uuid.UUID
    medication_id: uuid.UUID
    taken_at: datetime
    notes: str | None


@dataclass(frozen=True, slots=True)
class Symptom(Record):
    id: uuid.UUID
    name: str
    severity: int | None
    occurred_at: datetime
    notes: str | None


MEASUREMENT = Measurement.columns()


class HealthStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def log_measurement(
        self,
        type_: str,
        value: Any,
        unit: str | None,
        measured_at: datetime | None,
        notes: str | None,
    ) -> Measurement:
        row = await self._pool.fetchrow(
            f"INSERT INTO measurements (type, value, unit, measured_at, notes) "
            f"VALUES ($1, $2::text::jsonb, $3, COALESCE($4, clock_timestamp()), $5) "
            f"RETURNING {MEASUREMENT}",
            type_,
            dumps(value),
            unit,
            measured_at,
            notes,
        )
        return Measurement.from_row(row)

    async def measurements(
        self, type_: str | None, since: datetime | None, until: datetime | None, limit: int
    ) -> list[Measurement]:
        rows = await self._pool.fetch(
            f"SELECT {MEASUREMENT} FROM measurements "
            "WHERE ($1::text IS NULL OR type = $1) "
            "AND ($2::timestamptz IS NULL OR measured_at >= $2) "
            "AND ($3::timestamptz IS NULL OR measured_at < $3) "
            "ORDER BY measured_at DESC LIMIT $4",
            type_,
            since,
            until,
            limit,
        )
        return [Measurement.from_row(row) for row in rows]

    async def briefing(self, day: date, tz: ZoneInfo) -> list[str]:
        """The morning briefing's lines: yesterday's measurements, today's medications
        (active ones, and whether a dose is logged today)."""
        start, end = day_bounds(day, tz)
        yesterday = await self.measurements(None, start - timedelta(days=1), start, MAX_LINES)
        lines = [
            f"measured {m.type}: {m.value}{' ' + m.unit if m.unit else ''} "
            f"at {m.measured_at.astimezone(tz):%H:%M} yesterday"
            for m in reversed(yesterday)
        ]
        rows = await self._pool.fetch(
            "SELECT m.name, m.dosage, m.frequency, "
            "count(d.id) FILTER (WHERE d.taken_at >= $1 AND d.taken_at < $2) AS taken "
            "FROM medications m LEFT JOIN medication_doses d ON d.medication_id = m.id "
            "WHERE m.active GROUP BY m.id ORDER BY m.name LIMIT $3",
            start,
            end,
            MAX_LINES,
        )
        for row in rows:
            how = ", ".join(v for v in (row["dosage"], row["frequency"]) if v)
            taken = f"taken {row['taken']}x today" if row["taken"] else "not taken yet today"
            lines.append(f"medication {row['name']}{f' ({how})' if how else ''}: {taken}")
        return lines

    async def add_medication(
        self, name: str, dosage: str | None, frequency: str | None, notes: str | None
    ) -> Medication:
        row = await self._pool.fetchrow(
            "INSERT INTO medications (name, dosage, frequency, notes) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (name) DO UPDATE SET dosage = EXCLUDED.dosage, "
            "frequency = EXCLUDED.frequency, notes = EXCLUDED.notes, active = TRUE "
            "RETURNING id, name, dosage, frequency, notes, active, created_at",
            name,
            dosage,
            frequency,
            notes,
        )
        return Medication.from_row(row)

    async def medications(self, active_only: bool) -> list[MedicationListed]:
        rows = await self._pool.fetch(
            "SELECT m.id, m.name, m.dosage, m.frequency, m.notes, m.active, m.created_at, "
            "max(d.taken_at) AS last_taken_at FROM medications m "
            "LEFT JOIN medication_doses d ON d.medication_id = m.id "
            "WHERE NOT $1 OR m.active GROUP BY m.id ORDER BY m.name",
            active_only,
        )
        return [MedicationListed.from_row(row) for row in rows]

    async def log_dose(
        self, medication_id: uuid.UUID, taken_at: datetime | None, notes: str | None
    ) -> Dose | None:
        row = await self._pool.fetchrow(
            "INSERT INTO medication_doses (medication_id, taken_at, notes) "
            "SELECT id, COALESCE($2, clock_timestamp()), $3 FROM medications WHERE id = $1 "
            "RETURNING id, medication_id, taken_at, notes",
            medication_id,
            taken_at,
            notes,
        )
        return Dose.from_row(row) if row else None

    async def log_symptom(
        self, name: str, severity: int | None, occurred_at: datetime | None, notes: str | None
    ) -> Symptom:
        row = await self._pool.fetchrow(
            "INSERT INTO symptoms (name, severity, occurred_at, notes) "
            "VALUES ($1, $2, COALESCE($3, clock_timestamp()), $4) "
            "RETURNING id, name, severity, occurred_at, notes",
            name,
            severity,
            occurred_at,
            notes,
        )
        return Symptom.from_row(row)

    async def symptoms(self, name: str | None, since: datetime | None, limit: int) -> list[Symptom]:
        rows = await self._pool.fetch(
            f"SELECT {Symptom.columns()} FROM symptoms "
            "WHERE ($1::text IS NULL OR name = $1) "
            "AND ($2::timestamptz IS NULL OR occurred_at >= $2) "
            "ORDER BY occurred_at DESC LIMIT $3",
            name,
            since,
            limit,
        )
        return [Symptom.from_row(row) for row in rows]


# The dashboard's reads (`views.py`), newest first.
MEASUREMENTS = Listing(
    "measurements",
    Measurement,
    order_key="measured_at",
    order_sql="measured_at DESC, id DESC",
    clauses={"type": Clause("type = {}")},
)
MEDICATIONS = Listing(
    "medications", Medication, order_key="created_at", order_sql="created_at DESC, id DESC"
)
SYMPTOMS = Listing(
    "symptoms", Symptom, order_key="occurred_at", order_sql="occurred_at DESC, id DESC"
)
